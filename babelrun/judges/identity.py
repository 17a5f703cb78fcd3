"""``judge_id``: the short hash of everything that can change a judge's verdicts."""

from __future__ import annotations

import functools
import hashlib
from typing import Any

import msgspec

from ..spec import JudgeSpec
from .protocol import identity as protocol_identity
from .protocol import max_tokens, template_of
from .registry import options_of


def judge_id(spec: JudgeSpec) -> str:
    """Short hash of everything that can change a verdict, and nothing that cannot.

    In: backend, model, endpoint, prompt template name, version and language (a user's
    template: a hash of its text, never its file path), the verdict pattern and protocol
    (when declared), sampling parameters, reasoning options, the Azure deployment, a python
    judge's callable, and the simulated judge's knobs. Out: the judge's display name, concurrency, rate limits,
    timeouts, retries and the key variable, which change how fast verdicts come, not which.
    """
    template = template_of(spec)
    identity = {
        "backend": spec.backend,
        "model": spec.model,
        "endpoint": (spec.endpoint or "").rstrip("/"),
        "prompt": f"{template.name}@v{template.version}",
        "prompt_language": spec.prompt_language,
        "temperature": spec.temperature,
        "max_tokens": max_tokens(spec),
        "soft": spec.soft,
        "simulated": None,  # a simulated judge's knobs (its options' identity); kept so no id changes
        **protocol_identity(spec),
        **options_of(spec).identity(),  # the backend's own options that can change a verdict
        **({} if spec.seed is None else {"seed": spec.seed}),  # absent when unset: no id changes
    }
    blob = msgspec.json.encode(identity, order="sorted")
    return hashlib.blake2b(blob, digest_size=6).hexdigest()


def replay_identity(replay: Any) -> dict[str, Any]:
    """A replay judge is its file's content (a hash, never its path) and the judge chosen."""
    from pathlib import Path

    try:
        stat = Path(replay.path).stat()
        digest = _file_digest(replay.path, stat.st_size, stat.st_mtime_ns)
    except OSError:
        digest = "unreadable"
    return {"file": digest, "judge": replay.judge}


@functools.lru_cache(maxsize=64)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    """A file's content hash, read once per (path, size, mtime): judge ids are asked for often."""
    from pathlib import Path

    return hashlib.blake2b(Path(path).read_bytes(), digest_size=12).hexdigest()

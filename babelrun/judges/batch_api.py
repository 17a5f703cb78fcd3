"""The provider side of batch APIs: one adapter class per wire format, declared by the
backend that speaks it (``OpenAIJudge.batch_api``, ``AnthropicJudge.batch_api``). The engine
(``engine/batches.py``) owns the orchestration — what to submit, the state file, polling,
records — and never names a provider.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from .base import JudgeRequest, RetryableError
from .http import MAX_REPLY_BYTES, error_message, json_or_none

if TYPE_CHECKING:
    from .http import HttpJudge

MAX_RESULTS_BYTES = 1 << 30  # a results file: 1 GiB (50,000 results of ~20 KB)

# (custom id, the reply body to read with the backend's ``reply``, or None and the error)
BatchResult = tuple[str, bytes | None, str | None]


class Submission(Protocol):
    """What ``find`` needs of a submission that may have been created: its intent token,
    when it was made and its custom ids (``engine.batches.Pending``)."""

    intent: str
    created: float
    custom_ids: list[str]


class BatchStopped(Exception):
    """The batch cannot go on without the user (e.g. an ambiguous interrupted submission)."""


def jsonl(payload: bytes) -> list[dict[str, Any]]:
    """A results file's lines; a line that is not a JSON object is left out (its key then
    has no result, which is recorded as a batch error and retried on resume)."""
    docs = (json_or_none(line) for line in payload.splitlines() if line.strip())
    return [d for d in docs if isinstance(d, dict) and isinstance(d.get("custom_id"), str)]


def message(judge: HttpJudge, error: object) -> str:
    """The innermost ``message`` of a provider's (possibly nested) error object, masked."""
    return judge.mask(error_message(error) or str(error))


def timestamp(text: object) -> float | None:
    """An RFC 3339 timestamp as POSIX seconds; None if absent or unreadable."""
    try:
        when = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def batch_id(doc: dict[str, Any], what: str) -> str:
    if not isinstance(doc.get("id"), str):
        raise RetryableError("bad_response", f"no id in the reply to {what}")
    found: str = doc["id"]
    return found


class BatchApi:
    """The HTTP side shared by both providers: the judge's own session and its one mapping
    of statuses to errors (``HttpJudge.call``), so the key travels in its headers only and
    provider text is masked the same way as in calls."""

    provider = ""

    def __init__(self, judge: HttpJudge, on_request: Callable[[], None] = lambda: None) -> None:
        self.judge = judge
        self.on_request = on_request  # the engine counts every HTTP request as a call

    async def request(self, method: str, url: str, cap: int = MAX_REPLY_BYTES, **kwargs: Any) -> bytes:
        self.on_request()
        return await self.judge.call(method, url, cap=cap, **kwargs)

    async def json(self, method: str, url: str, body: object = None) -> dict[str, Any]:
        data = None if body is None else msgspec.json.encode(body)
        doc = json_or_none(await self.request(method, url, data=data))
        if not isinstance(doc, dict):
            raise RetryableError("bad_response", f"malformed response body from {method} {url}")
        return doc

    # each provider: submit -> batch id; poll -> (ended, batch object); results -> list[BatchResult];
    # find -> the id of a batch an interrupted create made, if any

    async def submit(self, todo: list[tuple[str, JudgeRequest]], intent: str) -> str:
        raise NotImplementedError

    async def poll(self, batch_id: str) -> tuple[bool, dict[str, Any]]:
        raise NotImplementedError

    async def results(self, batch: dict[str, Any]) -> list[BatchResult]:
        raise NotImplementedError

    async def find(self, pending: Submission) -> str | None:
        raise NotImplementedError



"""Live counters of the judges in one engine run, shared by the call pipeline, provider
batches and the bench; ``JudgeState.stats()`` is what ``stats.json`` keeps."""

from __future__ import annotations

import time
from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..core.records import Record
from ..store.stats import JudgeStats
from .ledger import Ledger


class Cancellable(Protocol):
    """What a drain ends: a judge's feed of calls (``pipeline._Feed``) or a provider batch's
    cancel scope."""

    def cancel(self) -> None: ...


@dataclass
class JudgeState:
    """Live counters of one judge, read by the progress display and the final stats."""

    name: str
    judge_id: str
    planned: int
    done_before: int
    ok: int = 0
    failed: int = 0
    calls: int = 0
    retries: int = 0
    rate_limited: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    consecutive_failures: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    latencies: array[float] = field(default_factory=lambda: array("d"))
    stopped: str | None = None
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None
    limit: int | None = None  # new presentations this process may judge (``audit --limit``)
    ledger: Ledger | None = None  # the cost ledger, when the judge has a price
    cached: int = 0  # records served by the response cache (no call)
    not_needed: int = 0  # keys left unjudged because their cell stopped (``stopping:``): not unfinished

    def count(self, record: Record) -> None:
        """Count one finished key: the one counter of calls and provider batches."""
        if record.status == "ok":
            self.ok += 1
            self.consecutive_failures = 0
            if record.latency_ms is not None:  # a batch result has no per-call latency
                self.latencies.append(record.latency_ms)
            self.tokens_in += record.tokens_in or 0
            self.tokens_out += record.tokens_out or 0
            if self.ledger is not None:
                self.ledger.add(record)
            return
        self.failed += 1
        self.errors[record.error_kind or "error"] += 1
        self.consecutive_failures += 1

    def add_call(self) -> None:
        self.calls += 1

    @property
    def remaining(self) -> int:
        return self.planned - self.done_before - self.ok

    @property
    def unfinished(self) -> int:
        """Presentations this process set out to judge and has no verdict for: all the
        remaining ones, or under a limit those of the first ``limit`` that failed."""
        todo = self.planned - self.done_before
        return max(0, (todo if self.limit is None else min(todo, self.limit)) - self.ok - self.not_needed)

    @property
    def elapsed(self) -> float:
        return (self.ended or time.monotonic()) - self.started

    def stats(self) -> JudgeStats:
        lat = np.frombuffer(self.latencies, dtype=np.float64) if self.latencies else None
        pct = {f"p{q}": None if lat is None else round(float(np.percentile(lat, q)), 2) for q in (50, 95, 99)}
        return JudgeStats(
            self.name, self.judge_id, self.planned, self.done_before, self.ok, self.failed,
            self.calls, self.retries, self.rate_limited, dict(sorted(self.errors.items())), pct,
            self.tokens_in, self.tokens_out,
            round(self.ok / self.elapsed, 2) if self.elapsed > 0 else 0.0,
            round(self.elapsed, 3), self.stopped,
            spend=None if self.ledger is None else self.ledger.summary(), cached=self.cached,
            not_needed=self.not_needed,
        )


@dataclass
class EngineResult:
    judges: list[JudgeState]
    interrupted: bool = False
    written: int = 0
    elapsed_s: float = 0.0

    @property
    def stop_reasons(self) -> list[str]:
        return [s.stopped for s in self.judges if s.stopped]

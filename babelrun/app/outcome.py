"""What an audit returns: its counts, its stats (stats.json's entry for this process) and,
when it scored, its cards, warnings and the report's diagnoses."""

from __future__ import annotations

from pathlib import Path

import msgspec

from .. import engine, score
from ..score.diagnose import Diagnosis
from ..store.stats import RunStats


class AuditResult(msgspec.Struct):
    run_dir: str
    planned_calls: int
    already_done: int
    new_records: int
    interrupted: bool
    stop_reasons: list[str]
    failed_calls: int
    stats: RunStats
    cards: score.Cards | None = None
    warnings: list[str] = []  # what the cards left out (see ``scoring.run_warnings``)
    # the report's diagnoses (``score.diagnose.of_run``), when the audit wrote the report
    diagnoses: list[Diagnosis] | None = None

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        return 1 if self.stop_reasons or self.failed_calls else 0


def result_of(run_dir: Path, outcome: engine.EngineResult) -> AuditResult:
    """The audit's result from the engine's: this process's counts and stats."""
    states = outcome.judges
    stats = RunStats(round(outcome.elapsed_s, 3), outcome.interrupted, [s.stats() for s in states])
    return AuditResult(
        run_dir=str(run_dir), planned_calls=sum(s.planned for s in states),
        already_done=sum(s.done_before for s in states), new_records=outcome.written,
        interrupted=outcome.interrupted, stop_reasons=[s.stopped for s in states if s.stopped],
        failed_calls=sum(s.unfinished for s in states), stats=stats,
    )


def combine_shards(parts: list[list[engine.JudgeState]]) -> list[engine.JudgeState]:
    """Each judge's counters summed over the shards' states (latencies pooled for the
    percentiles): the Ray executor's shards, as one process's."""
    merged: dict[str, engine.JudgeState] = {}
    for states in parts:
        for s in states:
            m = merged.get(s.judge_id)
            if m is None:
                merged[s.judge_id] = s
                continue
            for name in ("planned", "done_before", "ok", "failed", "calls", "retries", "rate_limited",
                         "tokens_in", "tokens_out", "cached", "not_needed"):
                setattr(m, name, getattr(m, name) + getattr(s, name))
            if m.ledger is not None and s.ledger is not None:  # the shards' spend, summed
                m.ledger.merge(s.ledger)
            m.errors.update(s.errors)
            m.latencies.extend(s.latencies)
            m.stopped = m.stopped or s.stopped
    return list(merged.values())

"""``stats.json``: what every audit process that wrote a run did, and their totals.

A stats file read back is untrusted input: it may be in a run directory received from someone
else. ``read`` is its one reader: a typed decode (counts are non-negative integers, seconds,
rates and amounts finite non-negative numbers, the spend ledger of a known shape), and a file
that is absent or fails it is None: it only describes a run, the log is the record."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import msgspec

Count = Annotated[int, msgspec.Meta(ge=0)]
# A finite non-negative number: an upper bound keeps out the infinity a JSON ``1e999`` decodes to.
Amount = Annotated[float, msgspec.Meta(ge=0, le=sys.float_info.max)]
MAX_STATS_BYTES = 64 << 20  # a stats file larger than this is not read (treated as absent)


class JudgeStats(msgspec.Struct, frozen=True):
    """What one judge did in one run (``stats.json``)."""

    judge: str
    judge_id: str
    planned: Count
    done_before: Count
    ok: Count
    failed: Count
    calls: Count  # HTTP or model calls, retries included
    retries: Count
    rate_limited: Count  # 429 replies
    errors: dict[str, Count]  # failed calls by final error kind
    latency_ms: dict[str, Amount | None]  # p50 / p95 / p99 of successful calls
    tokens_in: Count
    tokens_out: Count
    calls_per_s: Amount
    elapsed_s: Amount
    stopped: str | None
    # The cost ledger (engine/ledger.py's ``Ledger.summary``): total, by kind and language;
    # None without a price. Read back, it must have ``Spend``'s shape (``read``).
    spend: dict[str, Any] | None = None
    cached: Count = 0  # records served by the response cache
    not_needed: Count = 0  # keys left unjudged because their cell stopped (``stopping:``)


class Spend(msgspec.Struct, frozen=True):
    """The shape a judge's ``spend`` must have when a stats file is read back."""

    currency: str
    total: Amount
    by_kind: dict[str, Amount]
    calls_by_kind: dict[str, Count]
    by_language: dict[str, dict[str, Amount]]
    calls_by_language: dict[str, dict[str, Count]] = {}


class ProcessStats(msgspec.Struct, frozen=True):
    """What one audit process did (one entry of ``RunStats.processes``)."""

    elapsed_s: Amount
    interrupted: bool
    judges: list[JudgeStats]
    # What the run directory's readers had to work around: log lines skipped as invalid
    # (``segment:line (why)``), planned keys without a verdict. Empty for a healthy run.
    warnings: list[str] = []


class RunStats(msgspec.Struct, frozen=True):
    """``stats.json``: the totals over every audit process that wrote the run (``judges``,
    ``elapsed_s``; ``interrupted``: the last one was), and each process's own entry, oldest
    first. A process adds its entry; it never replaces another's (``accumulate``)."""

    elapsed_s: Amount
    interrupted: bool
    judges: list[JudgeStats]
    processes: list[ProcessStats] = []
    # What the run directory's readers had to work around, as of the last scoring: log lines
    # skipped as invalid (``segment:line (why)``), planned keys without a verdict.
    warnings: list[str] = []


def read(path: Path) -> RunStats | None:
    """The stats file at ``path``, validated; None when it is absent, too large, unreadable or
    fails the typed decode (another babelrun version's, or a hostile one): never a traceback."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_STATS_BYTES + 1)
        if len(data) > MAX_STATS_BYTES:
            return None
        stats = msgspec.json.decode(data, type=RunStats)
        for judge in [*stats.judges, *(j for p in stats.processes for j in p.judges)]:
            if judge.spend is not None:
                msgspec.convert(judge.spend, Spend)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    return stats


def encode(stats: RunStats) -> bytes:
    return msgspec.json.format(msgspec.json.encode(stats), indent=2)


def _total(entries: list[JudgeStats]) -> JudgeStats:
    """One judge's entries (oldest first) summed. Latency percentiles do not add up: the
    total shows those of the process that judged the most; planned and stopped are the last
    process's, done_before the first's."""
    first, last = entries[0], entries[-1]
    errors: dict[str, int] = {}
    for e in entries:
        for kind, n in e.errors.items():
            errors[kind] = errors.get(kind, 0) + n
    ok, elapsed = sum(e.ok for e in entries), sum(e.elapsed_s for e in entries)
    busiest = max(entries, key=lambda e: e.ok)
    return JudgeStats(last.judge, last.judge_id, last.planned, first.done_before, ok, sum(e.failed for e in entries),
                      sum(e.calls for e in entries), sum(e.retries for e in entries),
                      sum(e.rate_limited for e in entries), dict(sorted(errors.items())), busiest.latency_ms,
                      sum(e.tokens_in for e in entries), sum(e.tokens_out for e in entries),
                      round(ok / elapsed, 2) if elapsed > 0 else 0.0, round(elapsed, 3), last.stopped,
                      spend=spend_total([e.spend for e in entries]), cached=sum(e.cached for e in entries),
                      not_needed=last.not_needed)  # the last process's: each skips them anew
def spend_total(spends: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The cost ledgers of several processes (``JudgeStats.spend``) summed: the total, by
    kind, calls by kind and by language and kind; None when none had a price."""
    priced = [s for s in spends if s is not None]
    if not priced:
        return None
    total = 0.0
    by_kind: dict[str, float] = {}
    calls: dict[str, int] = {}
    by_lang: dict[str, dict[str, float]] = {}
    lang_calls: dict[str, dict[str, int]] = {}
    for s in priced:
        total += s["total"]
        for k, v in s["by_kind"].items():
            by_kind[k] = by_kind.get(k, 0.0) + v
        for k, n in s["calls_by_kind"].items():
            calls[k] = calls.get(k, 0) + n
        for lang, row in s["by_language"].items():
            into = by_lang.setdefault(lang, {})
            for k, v in row.items():
                into[k] = into.get(k, 0.0) + v
        for lang, counts in s.get("calls_by_language", {}).items():
            into_calls = lang_calls.setdefault(lang, {})
            for k, n in counts.items():
                into_calls[k] = into_calls.get(k, 0) + n
    return {"currency": priced[-1]["currency"], "total": round(total, 6),
            "by_kind": {k: round(v, 6) for k, v in by_kind.items()}, "calls_by_kind": dict(sorted(calls.items())),
            "by_language": {lang: {k: round(v, 6) for k, v in sorted(row.items())}
                            for lang, row in sorted(by_lang.items())},
            "calls_by_language": {lang: dict(sorted(row.items())) for lang, row in sorted(lang_calls.items())}}


def accumulate(previous: RunStats | None, this: RunStats) -> RunStats:
    """``previous`` (what stats.json held; None when absent) with this process's entry added
    and the totals recomputed. A file written before entries existed counts as one process."""
    processes = [] if previous is None else (
        previous.processes or [ProcessStats(previous.elapsed_s, previous.interrupted, previous.judges)])
    processes = [*processes, ProcessStats(this.elapsed_s, this.interrupted, this.judges)]
    by_judge: dict[tuple[str, str], list[JudgeStats]] = {}
    for proc in processes:
        for j in proc.judges:  # two names may share an id (the same settings): kept apart
            by_judge.setdefault((j.judge, j.judge_id), []).append(j)
    judges = sorted((_total(v) for v in by_judge.values()), key=lambda j: (j.judge, j.judge_id))
    return RunStats(round(sum(p.elapsed_s for p in processes), 3), this.interrupted, judges, processes,
                    this.warnings)



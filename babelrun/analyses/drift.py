"""``babelrun diff RUN_A RUN_B``: what changed between two runs over the same items.

A judge before and after a provider update, or under two prompt versions, is audited twice
on the same manifest content; this compares the two. Records are matched by
(item, order) — the item by the 60 bits of its content-hash id that ``judgements.parquet``
keeps as ``item_key`` — within a pair of judges: the only judge of each run, or else judges
of the same name (a name with several judge ids in one run is ambiguous and left out, with
a line saying so).

Per language and overall, on the matched records only:

- every card metric of each run (accuracy, Δ, κ_ord, v, R) with its interval, from
  ``babelrun.score.score`` on each run's matched subset;
- their change B − A, with a paired item-clustered percentile bootstrap: one resampling of
  the matched items weighs both runs' item tables alike, so the interval reflects the
  difference's own variance (smaller than the two runs' when their verdicts correlate).
  Seeded from ``seed`` and the judge pair and language: the same runs give the same output;
- an exact McNemar test on per-presentation correctness (b: correct in A only, c: correct
  in B only);
- a flag when the model name or fingerprint the provider reported (their sets per run)
  changed.

Judges are sampled: each run's verdict of a presentation is one draw, so two runs of an
unchanged judge disagree on some presentations. The gates need no self-flip baseline for that
(``tests/unit/test_drift_gate_sampled.py``): the paired bootstrap resamples items with both
runs' draws, so the interval of B − A carries the draws' own variance, and McNemar's b and c
are alike under no change. Runs record one draw per presentation; a verdict-flip gate like
``check``'s, which would need each run's self-consistency, is not made from them. A judge asked
``samples: k`` > 1 is compared on each presentation's sample 0 (``_load``): one draw a
presentation, what it gives asked once (as a composite is compared with its sampled base).

Pointwise judges (``score.pointwise``) are matched by (item, answer): per language, the mean
score change B − A on the references (the same answers scored again: the scale drift between
runs) and on every answer, with an item bootstrap, and each run's discrimination accuracy.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from ..score import Change, LanguageDrift, pointwise
from ..score.paired import (
    ALL,
    COLUMNS,
    Drift,
    compare,
    of_table,
    pair_judges,
)
from ..score.stats import fmt, fmt_interval
from ..store import compact
from ..store.rundir import read_run_info, without_escalation_judges


def _load(run_dir: Path) -> tuple[pa.Table, pa.Table]:
    """A run's pairwise and pointwise records."""
    info = read_run_info(run_dir)  # a clear error for a folder that is no run directory
    data = without_escalation_judges(compact.load(run_dir, COLUMNS), info)
    data = data.filter(pc.equal(pc.fill_null(data["sample"], 0), 0))  # (item, order) keys: one draw each
    alone = pointwise.is_pointwise(data)
    return data.filter(pc.invert(alone)), data.filter(alone)


def run(run_a: str | Path, run_b: str | Path, *, replicates: int = 1000, confidence: float = 0.95,
        seed: int = 0) -> Drift:
    """Compare two runs' verdicts on their shared items, per judge pair and language."""
    (pa_a, pw_a), (pa_b, pw_b) = _load(Path(run_a)), _load(Path(run_b))
    judges, notes = [], []
    if pa_a.num_rows and pa_b.num_rows:
        a, b = of_table(pa_a), of_table(pa_b)
        pairs, notes = pair_judges(a, b)
        judges = [compare(a, ja, b, jb, replicates, confidence, seed) for ja, jb in pairs]
        notes += [f"judges '{j.judge_a}' and '{j.judge_b}' share no (item, order): nothing to compare"
                  for j in judges if j.matched == 0]
        notes += [f"judges '{j.judge_a}' and '{j.judge_b}' share labelled pairs only: diff compares "
                  "degradation cards" for j in judges if j.matched and j.overall is None]
    drift = Drift(str(run_a), str(run_b), judges, notes, replicates, confidence, seed)
    if pw_a.num_rows and pw_b.num_rows:
        scored, more = pointwise.drift(pw_a, pw_b, replicates=replicates, confidence=confidence, seed=seed)
        drift = msgspec.structs.replace(drift, pointwise=scored, unmatched=[*notes, *more])
    return drift


def _block(d: LanguageDrift) -> list[str]:
    from ..score.metrics import BY_NAME

    m = d.mcnemar
    title = d.language if d.lang == ALL else f"{d.lang} {d.language}"
    out = [f"  {title}: {d.items} items, {d.presentations} presentations; "
           f"McNemar b {m.b}, c {m.c}, p {m.p:.3g}"]
    for c in d.changes:
        out.append(f"    {BY_NAME[c.metric].header:<18} {fmt_interval(c.a):<25} → {fmt_interval(c.b):<25} "
                   f"change {fmt(c.delta, True)} [{fmt(c.lo, True)}, {fmt(c.hi, True)}]")
    return out


def text(drift: Drift) -> str:
    """The comparison as plain text: unmatched judges, then one block per judge pair."""
    out = [f"Drift: A = {drift.run_a}, B = {drift.run_b}",
           f"Changes are B − A over matched (item, order) records; {drift.confidence:.0%} intervals: "
           f"each run's item bootstrap, and for the change a paired item bootstrap "
           f"({drift.bootstrap} replicates, seed {drift.seed}). McNemar: b correct in A only, "
           "c correct in B only."]
    out += [f"! {note}" for note in drift.unmatched]
    for j in drift.judges:
        s = j.served
        out.append(f"\n{j.judge_a} ({j.judge_id_a[:8]}) → {j.judge_b} ({j.judge_id_b[:8]}): "
                   f"{j.matched} presentations matched, {j.only_a} only in A, {j.only_b} only in B")
        if s.changed:
            out.append("  ! the provider reported another model or fingerprint")
        out.append(f"  served model {', '.join(s.model_a) or '–'} → {', '.join(s.model_b) or '–'}; "
                   f"fingerprint {', '.join(s.fingerprint_a) or '–'} → {', '.join(s.fingerprint_b) or '–'}")
        for d in ([j.overall] if j.overall else []) + j.languages:
            out.extend(_block(d))
    for p in drift.pointwise or []:
        out.append(f"\n{p.judge_a} ({p.judge_id_a[:8]}) → {p.judge_b} ({p.judge_id_b[:8]}), pointwise: "
                   f"{p.matched} answers scored in both runs")
        for d in [p.overall, *p.languages]:
            out.append(f"  {d.language:<18} references B − A {fmt_interval(d.references, True, n=True)}; all answers "
                       f"{fmt_interval(d.answers, True, n=True)}; discrimination {fmt(d.discrimination_a)} → "
                       f"{fmt(d.discrimination_b)}")
    return "\n".join(out) + "\n"


# What bare ``diff --fail-if-worse`` gates on (docs/analyses.md, *Drift gate*).
DEFAULT_GATE = ("accuracy", "reliability")


def gate_metrics(names: str | None) -> tuple[str, ...]:
    """The metrics ``--fail-if-worse`` names (comma-separated card metric names of
    ``score.metrics.REGISTRY``, or a header such as ``R``), checked: ``None`` (the bare flag)
    is ``DEFAULT_GATE``. A metric diff does not compare (ties, invalid) or an unknown name is
    refused (UsageError, one line)."""
    from ..errors import UsageError
    from ..score.metrics import REGISTRY

    if names is None:
        return DEFAULT_GATE
    compared = {m.name: m.name for m in REGISTRY if m.compared} | {m.header: m.name for m in REGISTRY if m.compared}
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in compared]
    if unknown or not wanted:
        raise UsageError(f"--fail-if-worse {names!r}: {', '.join(unknown) or 'no metric'} is not a metric diff "
                         f"compares; name some of {', '.join(m.name for m in REGISTRY if m.compared)}")
    return tuple(dict.fromkeys(compared[n] for n in wanted))


def _got_worse(metric: str, change: Change) -> bool:
    """Whether ``change`` (B − A, a paired interval) is a significant change for the worse:
    the whole interval on the bad side of 0 (below for a metric where higher is better); for a
    bias with no better direction (Δ, v), the interval excludes 0 and B is farther than A from
    the neutral point (0 for a signed bias, 0.5 for v)."""
    from ..score.metrics import BY_NAME

    if change.lo is None or change.hi is None:
        return False
    m = BY_NAME[metric]
    if m.higher_is_better is True:
        return change.hi < 0
    if m.higher_is_better is False:
        return change.lo > 0
    neutral = 0.0 if m.signed else 0.5
    a, b = change.a.value, change.b.value
    return (change.lo > 0 or change.hi < 0) and a is not None and b is not None and abs(b - neutral) > abs(a - neutral)


def worse(drift: Drift, alpha: float = 0.05, metrics: tuple[str, ...] = DEFAULT_GATE) -> list[str]:
    """Why B is worse than A, one line per judge pair and metric that is (``diff
    --fail-if-worse [METRICS]``): over all matched presentations, a named metric's paired
    change is significantly for the worse (``_got_worse``); with ``accuracy`` named, also B
    right less often with McNemar p below ``alpha``. Per-language changes are not tested
    (many languages, many tests: the overall comparison is the gate)."""
    from ..score.metrics import BY_NAME

    out = []
    for j in drift.judges:
        d = j.overall
        if d is None:
            continue
        m = d.mcnemar
        if "accuracy" in metrics and m.c < m.b and m.p < alpha:
            out.append(f"{j.judge_b}: correct in A only {m.b}, in B only {m.c} (McNemar p {m.p:.3g} < {alpha})")
        for change in d.changes:
            if change.metric in metrics and _got_worse(change.metric, change):
                assert change.delta is not None and change.lo is not None and change.hi is not None
                out.append(f"{j.judge_b}: {BY_NAME[change.metric].header} changed {change.delta:+.3f} "
                           f"[{change.lo:+.3f}, {change.hi:+.3f}]")
    return out

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
"""

from __future__ import annotations

from pathlib import Path

from ..score import Interval, LanguageDrift
from ..score.paired import (
    ALL,
    COLUMNS,
    Drift,
    Matched,
    compare,
    of_table,
    pair_judges,
)
from ..store import compact
from ..store.rundir import read_run_info


def _load(run_dir: Path) -> Matched:
    read_run_info(run_dir)  # a clear error for a folder that is no run directory
    return of_table(compact.load(run_dir, COLUMNS))


def run(run_a: str | Path, run_b: str | Path, *, replicates: int = 1000, confidence: float = 0.95,
        seed: int = 0) -> Drift:
    """Compare two runs' verdicts on their shared items, per judge pair and language."""
    a, b = _load(Path(run_a)), _load(Path(run_b))
    pairs, notes = pair_judges(a, b)
    judges = [compare(a, ja, b, jb, replicates, confidence, seed) for ja, jb in pairs]
    notes += [f"judges '{j.judge_a}' and '{j.judge_b}' share no (item, order): nothing to compare"
              for j in judges if j.matched == 0]
    return Drift(str(run_a), str(run_b), judges, notes, replicates, confidence, seed)


_LABELS = {"accuracy": "accuracy", "position_bias": "position bias Δ",
           "order_consistency": "order consistency", "verbosity": "verbosity v",
           "reliability": "R"}


def _num(x: float | None, sign: bool = False) -> str:
    if x is None:
        return "–"
    x = 0.0 if abs(x) < 5e-4 else x  # no "−0.000"
    return f"{x:+.3f}".replace("-", "−") if sign else f"{x:.3f}".replace("-", "−")


def _interval(i: Interval) -> str:
    return f"{_num(i.value)} [{_num(i.lo)}, {_num(i.hi)}]"


def _block(d: LanguageDrift) -> list[str]:
    m = d.mcnemar
    title = d.language if d.lang == ALL else f"{d.lang} {d.language}"
    out = [f"  {title}: {d.items} items, {d.presentations} presentations; "
           f"McNemar b {m.b}, c {m.c}, p {m.p:.3g}"]
    for c in d.changes:
        out.append(f"    {_LABELS[c.metric]:<18} {_interval(c.a):<25} → {_interval(c.b):<25} "
                   f"change {_num(c.delta, True)} [{_num(c.lo, True)}, {_num(c.hi, True)}]")
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
    return "\n".join(out) + "\n"


def worse(drift: Drift, alpha: float = 0.05) -> list[str]:
    """Why B is worse than A, one line per judge pair that is (``diff --fail-if-worse``): over
    all matched presentations, B is right less often with McNemar p below ``alpha``, or R's
    paired change has its whole interval below 0. Per-language changes are not tested (many
    languages, many tests: the overall comparison is the gate)."""
    out = []
    for j in drift.judges:
        d = j.overall
        if d is None:
            continue
        m = d.mcnemar
        if m.c < m.b and m.p < alpha:
            out.append(f"{j.judge_b}: correct in A only {m.b}, in B only {m.c} (McNemar p {m.p:.3g} < {alpha})")
        r = next((c for c in d.changes if c.metric == "reliability"), None)
        if r is not None and r.hi is not None and r.hi < 0:
            out.append(f"{j.judge_b}: R changed {r.delta:+.3f} [{r.lo:+.3f}, {r.hi:+.3f}]")
    return out

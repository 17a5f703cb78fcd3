"""Language-switch invariance (the Judge-LS protocol) on a parallel corpus.

In a parallel corpus (UDHR units, FLORES lines) the same unit exists in every language with
the same ``ref_id``. For the same judge, unit, perturbation, severity and slot order, a
language-invariant judge gives the same verdict in the pivot language and in the target
language. Per judge and target language this reports

- the judgment-flip rate: the verdict (reference / perturbed / tie / invalid) differs;
- the correctness-flip rate: right in one language, wrong in the other;

each with a Wilson interval, and an exact McNemar p-value on correctness (b: right in the
pivot only, c: right in the target only). Only keys judged in both languages count.

Where the run holds the parallel families (``corpus.parallel`` in the manifest), it also
reports the **code-switched** condition the same way (the target-language item against the
code-switched item of the same unit, perturbation, severity and order), and the
**translation tie probes**: the tie rate, and among decisive verdicts the share that
preferred the pivot-language answer (0.5 is no preference), each with a Wilson interval.

Labelled pairs in several language conditions (the Judge-LS protocol) are analysed the same
way, with accuracy (strict and tie-half), position inconsistency, per-subset rows and a
transformation audit with its sensitivity analysis: ``judge_ls.py``.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core import languages
from ..core.items import LabelledPair, bare_name
from ..score import stats
from ..score.pointwise import all_pointwise, pairwise_only
from ..score.stats import Interval, fmt_interval
from ..store import compact
from . import judge_ls
from .judge_ls import DEFAULT_RULES, AuditRules

_COLUMNS = ["judge_id", "judge", "kind", "lang", "ref_id", "perturbation", "severity", "order", "verdict"]


class LanguageSwitch(msgspec.Struct, frozen=True):
    judge: str
    lang: str
    language: str
    matched: int  # keys judged in both the pivot and this language
    judgment_flip: Interval
    correctness_flip: Interval
    right_in_pivot_only: int
    right_in_target_only: int
    mcnemar_p: float


class TieProbes(msgspec.Struct, frozen=True):
    judge: str
    lang: str
    language: str
    probes: int  # presentations (both orders)
    tie_rate: Interval
    pivot_share: Interval  # among decisive verdicts, the share that chose the pivot's answer


class Invariance(msgspec.Struct, frozen=True):
    pivot: str
    rows: list[LanguageSwitch]
    code_switched: list[LanguageSwitch] = []
    tie_probes: list[TieProbes] = []
    labelled: judge_ls.LabelledInvariance | None = None  # labelled pairs in several conditions


def _rate(k: int, n: int, confidence: float) -> Interval:
    if n == 0:
        return Interval(None, None, None, 0)
    lo, hi = stats.wilson(k, n, confidence)
    return Interval(round(k / n, 4), round(float(lo), 4), round(float(hi), 4), n)


def _keyed(table: pa.Table) -> dict[tuple, str]:
    """(unit, perturbation without its family prefix, severity, order) -> verdict."""
    perturbation = [bare_name(p) for p in table["perturbation"].to_pylist()]
    keys = zip(table["ref_id"].to_pylist(), perturbation, table["severity"].to_pylist(),
               table["order"].to_pylist(), strict=True)
    return dict(zip(keys, table["verdict"].to_pylist(), strict=True))


def _switch(name: str, lang: str, base: dict, other: dict, confidence: float) -> LanguageSwitch:
    shared = sorted(base.keys() & other.keys())
    a = np.array([base[k] for k in shared], dtype=object)
    b = np.array([other[k] for k in shared], dtype=object)
    right_a, right_b = a == "reference", b == "reference"
    only_a, only_b = int((right_a & ~right_b).sum()), int((right_b & ~right_a).sum())
    return LanguageSwitch(
        name, lang, languages.name(lang), len(shared),
        _rate(int((a != b).sum()), len(shared), confidence),
        _rate(only_a + only_b, len(shared), confidence),
        only_a, only_b, round(stats.mcnemar_exact(only_a, only_b), 6),
    )


def _of(table: pa.Table, column: str, value: str) -> pa.Table:
    return table.filter(pc.equal(table[column].cast(pa.string()), value))


def _ties(name: str, lang: str, probes: pa.Table, confidence: float) -> TieProbes:
    verdicts = probes["verdict"].to_pylist()
    ties = verdicts.count("tie")
    pivot, target = verdicts.count("reference"), verdicts.count("perturbed")
    return TieProbes(name, lang, languages.name(lang), len(verdicts), _rate(ties, len(verdicts), confidence),
                     _rate(pivot, pivot + target, confidence))


def _pivot(pivot: str) -> str:
    """A language's standard tag; a named mix (a labelled-pair condition) as written."""
    try:
        return languages.normalize(pivot)
    except ValueError:
        return pivot


def compare(data: pa.Table, pivot: str, confidence: float = 0.95, pairs: list[LabelledPair] | None = None,
            rules: AuditRules = DEFAULT_RULES) -> Invariance:
    """Flip rates of every judge and target language against ``pivot``, from counted records;
    with ``pairs`` (the run's labelled pairs, for the audit), the Judge-LS analysis too."""
    pivot = _pivot(pivot)
    data = data.filter(pc.not_equal(data["ref_id"].cast(pa.string()), ""))
    # Tie probes of labelled pairs name their condition after "@": they belong to judge_ls.
    pair_probe = pc.match_substring(data["perturbation"].cast(pa.string()), "@")
    labelled = _of(data, "kind", "labelled")
    pair_probes = data.filter(pc.and_(pc.equal(data["kind"].cast(pa.string()), "tie_probe"), pair_probe))
    data = data.filter(pc.invert(pair_probe))
    rows, mixed, ties = [], [], []
    for jid in sorted(set(data["judge_id"].to_pylist())):
        mine = _of(data, "judge_id", jid)
        name = mine["judge"][0].as_py()
        plain = _of(mine, "kind", "text")
        if not plain.num_rows:
            continue  # no parallel text items (a labelled-pairs run)
        base = _keyed(_of(plain, "lang", pivot))
        for lang in sorted(set(mine["lang"].to_pylist()) - {pivot}):
            target = _keyed(_of(plain, "lang", lang))
            rows.append(_switch(name, lang, base, target, confidence))
            switched = _keyed(_of(_of(mine, "kind", "code_switched"), "lang", lang))
            if switched:
                mixed.append(_switch(name, lang, target, switched, confidence))
            probes = _of(_of(mine, "kind", "tie_probe"), "lang", lang)
            if probes.num_rows:
                ties.append(_ties(name, lang, probes, confidence))
    by_pairs = (judge_ls.compare(labelled, pair_probes, pairs or [], pivot, rules, confidence)
                if labelled.num_rows else None)
    return Invariance(pivot, rows, mixed, ties, by_pairs)


def run(run_dir: Path, pivot: str = "en", confidence: float = 0.95, rules: AuditRules = DEFAULT_RULES) -> Invariance:
    from .. import corpus
    from ..errors import NotApplicable
    from ..store.rundir import read_run_info

    records = compact.load(Path(run_dir), _COLUMNS)
    if alone := all_pointwise(records):
        raise NotApplicable(f"{run_dir}: invariance compares pairwise verdicts, and every judge of the run is "
                            f"pointwise ({', '.join(alone)})")
    data = pairwise_only(records)
    pairs = None
    if pc.any(pc.equal(data["kind"].cast(pa.string()), "labelled")).as_py():
        pairs = corpus.select(read_run_info(Path(run_dir)).manifest).pairs  # texts, for the audit
    return compare(data, pivot, confidence, pairs, rules)


def _switch_table(rows: list[LanguageSwitch], first: str, second: str) -> list[str]:
    lines = [f"| judge | language | matched | judgment flips | correctness flips | "
             f"right in {first} only / {second} only | McNemar p |",
             "|---|---|---:|---|---|---|---:|"]
    for r in rows:
        lines.append(f"| {r.judge} | {r.lang} ({r.language}) | {r.matched} | {fmt_interval(r.judgment_flip)} | "
                     f"{fmt_interval(r.correctness_flip)} | {r.right_in_pivot_only} / {r.right_in_target_only} | "
                     f"{r.mcnemar_p:.3g} |")
    return lines


def text(result: Invariance) -> str:
    if not result.rows and result.labelled is not None:
        return judge_ls.text(result.labelled)
    pivot = f"{result.pivot} ({languages.name(result.pivot)})"
    lines = [f"Language-switch invariance against {pivot}", ""]
    lines += _switch_table(result.rows, "pivot", "target")
    if not any(r.matched for r in result.rows):
        lines += ["", "No unit was judged in both languages: is the corpus parallel (UDHR, FLORES)?"]
    if result.code_switched:
        lines += ["", f"Code-switched (target and {result.pivot} sentences alternating) against the target language",
                  ""]
        lines += _switch_table(result.code_switched, "target", "code-switched")
    if result.tie_probes:
        lines += ["", f"Translation tie probes (the same answer in {result.pivot} and in the target language)", "",
                  "| judge | language | presentations | tie rate | pivot share of decisive verdicts |",
                  "|---|---|---:|---|---|"]
        lines += [f"| {t.judge} | {t.lang} ({t.language}) | {t.probes} | {fmt_interval(t.tie_rate)} | "
                  f"{fmt_interval(t.pivot_share)} |"
                  for t in result.tie_probes]
    if result.labelled is not None:
        lines += ["", judge_ls.text(result.labelled).rstrip("\n")]
    return "\n".join(lines) + "\n"

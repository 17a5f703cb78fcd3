"""The Judge-LS protocol on labelled pairs: one human-labelled pair in several language
conditions (English, Chinese, a Chinese-English mix), judged in both slot orders.

A pair's conditions share its alignment id (its ``ref_id``); a record's condition is its
language, or the mix named after ``@`` in its perturbation (``pairs:<set>@zh-en-switched``).
Per judge, condition and subset (all pairs, then each LLMBar set) this reports

- strict accuracy (the better output named) and tie-half accuracy (a tie counts ½; its
  interval is Wilson's on the fractional count, an approximation);
- position inconsistency: the share of pairs, judged in both orders, whose two verdicts differ;
- against the pivot condition, for the same pair, set and order: the judgment-flip and
  correctness-flip rates with Wilson intervals and the exact McNemar p-value (b: right in the
  pivot only, c: right in the condition only);
- translation-equivalent tie probes (``corpus.parallel.tie_probes``): the pivot's better
  output against the condition's: the tie rate and, of decisive verdicts, the pivot's share.

**Transformation audit.** Before any figure is trusted, every variant is compared with its
pivot pair, field by field (prompt, better output, worse output), under ``AuditRules``:

- ``empty``: the variant's field is empty (after trimming) where the pivot's is not;
- ``shrinkage``: the variant's field has fewer than ``min_length_ratio`` times the pivot's
  characters (0.15 by default: Chinese takes about a third of English's characters, so only
  a severe loss trips it), where the pivot's field has at least ``min_chars`` (20);
- ``numbers``: the count of numeric tokens (runs of digits in any script, with ``.``/``,``
  inside) differs by more than ``max_number_change`` (1).

A flagged alignment id is dropped from every condition in the sensitivity analysis: every
row is given twice, for all pairs and for the audit-passing pairs.
"""

from __future__ import annotations

import re
from collections import defaultdict

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core import languages
from ..core.items import LabelledPair, bare_name
from ..score import stats
from ..score.stats import Interval, fmt_interval

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
FIELDS = ("prompt", "better", "worse")


class AuditRules(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    min_length_ratio: float = 0.15
    min_chars: int = 20
    max_number_change: int = 1


DEFAULT_RULES = AuditRules()


class AuditFlag(msgspec.Struct, frozen=True):
    pair_id: str
    condition: str
    field: str  # prompt, better or worse
    rule: str  # empty, shrinkage or numbers
    pivot: int  # the pivot's characters (shrinkage, empty) or numbers (numbers)
    variant: int


class ConditionRow(msgspec.Struct, frozen=True):
    judge: str
    condition: str
    language: str  # the condition language's English name
    subset: str  # "all", or an LLMBar set
    pairs: int
    accuracy: Interval  # strict
    accuracy_tie_half: Interval
    position_inconsistency: Interval
    matched: int = 0  # presentations judged in this condition and in the pivot
    judgment_flip: Interval | None = None  # None for the pivot itself
    correctness_flip: Interval | None = None
    right_in_pivot_only: int = 0
    right_in_condition_only: int = 0
    mcnemar_p: float | None = None


class ConditionTies(msgspec.Struct, frozen=True):
    judge: str
    condition: str
    probes: int
    tie_rate: Interval
    pivot_share: Interval


class Sensitivity(msgspec.Struct, frozen=True):
    """Every row over one set of pairs: all of them, or those the audit passed."""

    pairs: int  # alignment ids
    rows: list[ConditionRow]
    tie_probes: list[ConditionTies]


class LabelledInvariance(msgspec.Struct, frozen=True):
    pivot: str
    rules: AuditRules
    flags: list[AuditFlag]
    flagged: list[str]  # alignment ids with at least one flag
    all_pairs: Sensitivity
    audit_passing: Sensitivity


def rate(k: float, n: int, confidence: float) -> Interval:
    if n == 0:
        return Interval(None, None, None, 0)
    lo, hi = stats.wilson(k, n, confidence)
    return Interval(round(k / n, 4), round(float(lo), 4), round(float(hi), 4), n)


def condition(lang: str, perturbation: str) -> str:
    """A record's condition: the mix after ``@`` in its perturbation, else its language."""
    return perturbation.split("@", 1)[1] if "@" in perturbation else lang


def subset(perturbation: str) -> str:
    return bare_name(perturbation.split("@", 1)[0])


# ---- the transformation audit ---------------------------------------------------------------


def _numbers(text: str) -> int:
    return len(_NUMBER.findall(text))


def _field_flags(pid: str, cond: str, field: str, base: str, variant: str, rules: AuditRules) -> list[AuditFlag]:
    flags = []
    if base.strip() and not variant.strip():
        flags.append(AuditFlag(pid, cond, field, "empty", len(base), len(variant)))
    elif len(base) >= rules.min_chars and len(variant) < rules.min_length_ratio * len(base):
        flags.append(AuditFlag(pid, cond, field, "shrinkage", len(base), len(variant)))
    nb, nv = _numbers(base), _numbers(variant)
    if abs(nb - nv) > rules.max_number_change:
        flags.append(AuditFlag(pid, cond, field, "numbers", nb, nv))
    return flags


def audit(pairs: list[LabelledPair], pivot: str, rules: AuditRules) -> list[AuditFlag]:
    """Flags of every variant against its pivot pair (same alignment id)."""
    base = {p.pair_id: p for p in pairs if (p.condition or p.lang) == pivot}
    flags = []
    for p in pairs:
        cond = p.condition or p.lang
        if cond == pivot or p.pair_id not in base:
            continue
        b = base[p.pair_id]
        for field in FIELDS:
            flags += _field_flags(p.pair_id, cond, field, getattr(b, field), getattr(p, field), rules)
    return flags


# ---- the rows -------------------------------------------------------------------------------


class _Rec(msgspec.Struct, frozen=True):
    cond: str
    subset: str
    pair: str
    order: str
    verdict: str


def _records(table: pa.Table) -> list[_Rec]:
    cols = [table[c].to_pylist() for c in ("lang", "perturbation", "ref_id", "order", "verdict")]
    return [_Rec(condition(lang, pert), subset(pert), rid, order, verdict)
            for lang, pert, rid, order, verdict in zip(*cols, strict=True)]


def _row(judge: str, cond: str, name: str, mine: list[_Rec], base: dict, confidence: float,
         is_pivot: bool) -> ConditionRow:
    verdicts = np.array([r.verdict for r in mine], dtype=object)
    n = len(mine)
    right, ties = int((verdicts == "reference").sum()), int((verdicts == "tie").sum())
    by_pair: dict[str, dict[str, str]] = defaultdict(dict)
    for r in mine:
        by_pair[r.pair][r.order] = r.verdict
    both = [v for v in by_pair.values() if len(v) == 2]
    inconsistent = sum(v["ref_first"] != v["pert_first"] for v in both)
    row = ConditionRow(judge, cond, _language(cond), name, len(by_pair), rate(right, n, confidence),
                       rate(right + 0.5 * ties, n, confidence), rate(inconsistent, len(both), confidence))
    if is_pivot:
        return row
    here = {(r.pair, r.subset, r.order): r.verdict for r in mine}
    shared = sorted(here.keys() & base.keys())
    a = np.array([base[k] for k in shared], dtype=object)
    b = np.array([here[k] for k in shared], dtype=object)
    ra, rb = a == "reference", b == "reference"
    only_a, only_b = int((ra & ~rb).sum()), int((rb & ~ra).sum())
    return msgspec.structs.replace(
        row, matched=len(shared), judgment_flip=rate(int((a != b).sum()), len(shared), confidence),
        correctness_flip=rate(only_a + only_b, len(shared), confidence), right_in_pivot_only=only_a,
        right_in_condition_only=only_b, mcnemar_p=round(stats.mcnemar_exact(only_a, only_b), 6))


def _language(cond: str) -> str:
    try:
        return languages.name(languages.normalize(cond))
    except ValueError:
        first = cond.split("-", 1)[0]
        return f"{languages.name(languages.normalize(first))} (mix)"


def _rows(judge: str, recs: list[_Rec], pivot: str, confidence: float) -> list[ConditionRow]:
    rows = []
    conditions = sorted({r.cond for r in recs}, key=lambda c: (c != pivot, c))
    for name in ["all", *sorted({r.subset for r in recs})]:
        chosen = [r for r in recs if name == "all" or r.subset == name]
        base = {(r.pair, r.subset, r.order): r.verdict for r in chosen if r.cond == pivot}
        for cond in conditions:
            mine = [r for r in chosen if r.cond == cond]
            if mine:
                rows.append(_row(judge, cond, name, mine, base, confidence, cond == pivot))
    return rows


def _ties(judge: str, probes: pa.Table, confidence: float) -> list[ConditionTies]:
    by_cond: dict[str, list[str]] = defaultdict(list)
    for pert, verdict in zip(probes["perturbation"].to_pylist(), probes["verdict"].to_pylist(), strict=True):
        by_cond[pert.split("@", 1)[1]].append(verdict)
    out = []
    for cond, verdicts in sorted(by_cond.items()):
        pivot, target = verdicts.count("reference"), verdicts.count("perturbed")
        out.append(ConditionTies(judge, cond, len(verdicts), rate(verdicts.count("tie"), len(verdicts), confidence),
                                 rate(pivot, pivot + target, confidence)))
    return out


def _sensitivity(labelled: pa.Table, probes: pa.Table, pivot: str, keep, confidence: float) -> Sensitivity:
    rows, ties = [], []
    pair_ids = set()
    for jid in sorted(set(labelled["judge_id"].to_pylist()) | set(probes["judge_id"].to_pylist())):
        mine = labelled.filter(pc.equal(labelled["judge_id"], jid))
        recs = [r for r in _records(mine) if keep(r.pair)]
        pair_ids |= {r.pair for r in recs}
        name = (mine if mine.num_rows else probes.filter(pc.equal(probes["judge_id"], jid)))["judge"][0].as_py()
        rows += _rows(name, recs, pivot, confidence)
        theirs = probes.filter(pc.equal(probes["judge_id"], jid))
        theirs = theirs.filter(pa.array([keep(r) for r in theirs["ref_id"].to_pylist()], type=pa.bool_()))
        ties += _ties(name, theirs, confidence)
    return Sensitivity(len(pair_ids), rows, ties)


def compare(labelled: pa.Table, probes: pa.Table, pairs: list[LabelledPair], pivot: str,
            rules: AuditRules = DEFAULT_RULES, confidence: float = 0.95) -> LabelledInvariance:
    """``labelled``: counted records of kind labelled; ``probes``: of kind tie_probe whose
    perturbation names a condition (``tie_probe:en@zh``); ``pairs``: the run's pairs (texts,
    for the audit)."""
    flags = audit(pairs, pivot, rules)
    flagged = sorted({f.pair_id for f in flags})
    drop = set(flagged)
    return LabelledInvariance(
        pivot, rules, flags, flagged,
        _sensitivity(labelled, probes, pivot, lambda pid: True, confidence),
        _sensitivity(labelled, probes, pivot, lambda pid: pid not in drop, confidence))


# ---- text -----------------------------------------------------------------------------------


def _table(s: Sensitivity) -> list[str]:
    lines = ["| judge | condition | subset | pairs | accuracy | tie-half accuracy | position inconsistency | "
             "judgment flips | correctness flips | pivot only / condition only | McNemar p |",
             "|---|---|---|---:|---|---|---|---|---|---|---:|"]
    for r in s.rows:
        p = "–" if r.mcnemar_p is None else f"{r.mcnemar_p:.3g}"
        split = "–" if r.judgment_flip is None else f"{r.right_in_pivot_only} / {r.right_in_condition_only}"
        lines.append(f"| {r.judge} | {r.condition} | {r.subset} | {r.pairs} | {fmt_interval(r.accuracy)} | "
                     f"{fmt_interval(r.accuracy_tie_half)} | {fmt_interval(r.position_inconsistency)} | "
                     f"{fmt_interval(r.judgment_flip)} | "
                     f"{fmt_interval(r.correctness_flip)} | {split} | {p} |")
    if s.tie_probes:
        lines += ["", "| judge | condition | tie probes | tie rate | pivot share of decisive verdicts |",
                  "|---|---|---:|---|---|"]
        lines += [f"| {t.judge} | {t.condition} | {t.probes} | {fmt_interval(t.tie_rate)} | "
                  f"{fmt_interval(t.pivot_share)} |"
                  for t in s.tie_probes]
    return lines


def text(result: LabelledInvariance) -> str:
    r = result.rules
    by_rule = defaultdict(int)
    for f in result.flags:
        by_rule[f.rule] += 1
    counts = ", ".join(f"{k} {v}" for k, v in sorted(by_rule.items())) or "none"
    lines = [f"Labelled pairs across language conditions (Judge-LS), pivot {result.pivot}", "",
             f"Transformation audit (empty fields; shrinkage below {r.min_length_ratio:g}× the pivot's characters "
             f"where it has ≥ {r.min_chars}; numeric tokens changed by more than {r.max_number_change}): "
             f"{len(result.flagged)} of {result.all_pairs.pairs} pairs flagged ({counts})", ""]
    if result.flagged:
        lines += ["flagged: " + ", ".join(result.flagged[:40]) + (" …" if len(result.flagged) > 40 else ""), ""]
    lines += [f"All pairs ({result.all_pairs.pairs})", ""] + _table(result.all_pairs)
    lines += ["", f"Audit-passing pairs ({result.audit_passing.pairs})", ""] + _table(result.audit_passing)
    return "\n".join(lines) + "\n"

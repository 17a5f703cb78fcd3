"""Cards as one long table: a row per (judge, language, perturbation, metric), for notebooks and
``babelrun export`` (pandas, polars, DuckDB read it as it is; no nesting to unpick).

Columns: run, judge, judge_id, family (``text`` cards, a labelled set's ``pairs:<set>``,
``agentic`` or ``pointwise`` ones: R_pw is the pointwise ``reliability``; the robustness
probes' ``probes`` or ``probes:pointwise``, with their ``cue_effect``, ``cue_success``,
``score_lift`` (pointwise), ``slot_preference`` and ``mcnemar_p`` — value the exact p, n the discordant pairs — and each
probe over every language as lang ``all``), lang (``all``: the judge's overall card),
perturbation (``all``: the language's card), metric, value, lo, hi, n. ``items`` and
``presentations`` are metrics too (value = the count, n = the count).
"""

from __future__ import annotations

from typing import Any

import msgspec
import pyarrow as pa

from .metrics import REGISTRY
from .stats import Interval

ALL = "all"
PROBE_FAMILIES = ("probes", "probes:pointwise")  # score/probes.py's FAMILY, POINTWISE_FAMILY
SCHEMA = pa.schema([("run", pa.string()), ("judge", pa.string()), ("judge_id", pa.string()),
                    ("family", pa.string()), ("lang", pa.string()), ("perturbation", pa.string()),
                    ("metric", pa.string()), ("value", pa.float64()), ("lo", pa.float64()),
                    ("hi", pa.float64()), ("n", pa.int64())])


def _metrics(card: Any, family: str) -> list[tuple[str, Interval]]:
    """A card's intervals by name (its counts as intervals without bounds): a text card's
    registered metrics (``metrics.REGISTRY``, in its order) then its other intervals (the
    soft margin); an agentic card's intervals in field order."""
    shown = getattr(card, "presentations", None)
    if shown is None:  # a pointwise card: its calls (one answer each)
        shown = card.calls
    out = [("items", Interval(card.items, None, None, card.items)),
           ("presentations", Interval(shown, None, None, shown))]
    registered = {m.name for m in REGISTRY} if family not in ("agentic", "pointwise") else set()
    out += [(m.name, getattr(card, m.name)) for m in REGISTRY
            if m.name in registered and not isinstance(getattr(card, m.name, msgspec.UNSET), msgspec.UnsetType)]
    for field in msgspec.structs.fields(card):
        if field.name in registered:
            continue
        value = getattr(card, field.name)
        if isinstance(value, Interval):
            out.append((field.name, value))
    return out


def rows(cards: Any, run: str = "") -> list[tuple[Any, ...]]:
    """The long table's rows (``SCHEMA``) of ``cards`` (a ``score.Cards``)."""
    out: list[tuple[Any, ...]] = []

    def add(judge: Any, family: str, lang: str, pert: str, card: Any) -> None:
        out.extend((run, judge.judge, judge.judge_id, family, lang, pert, name, iv.value, iv.lo, iv.hi, iv.n)
                   for name, iv in _metrics(card, family))
        test = getattr(card, "mcnemar", None) if family in PROBE_FAMILIES else None  # the paired test
        if test is not None:
            out.append((run, judge.judge, judge.judge_id, family, lang, pert, "mcnemar_p", test.p, None, None,
                        test.b + test.c))

    for jc in cards.judges:
        add(jc, "text", ALL, ALL, jc.overall)
        for lc in jc.languages:
            add(jc, "text", lc.lang, ALL, lc.card)
            for pc in lc.perturbations:
                add(jc, "text", lc.lang, pc.perturbation, pc.card)
    for fc in cards.pairs:
        for jc in fc.judges:
            add(jc, fc.family, ALL, ALL, jc.overall)
            for lc in jc.languages:
                add(jc, fc.family, lc.lang, ALL, lc.card)
    for jc in cards.agentic:
        add(jc, "agentic", ALL, ALL, jc.overall)
        for lc in jc.languages:
            add(jc, "agentic", lc.lang, ALL, lc.card)
    for pj in cards.pointwise or []:
        add(pj, "pointwise", ALL, ALL, pj.overall)
        for pl in pj.languages:
            add(pj, "pointwise", pl.lang, ALL, pl.card)
        for pp in pj.perturbations:
            add(pj, "pointwise", ALL, pp.perturbation, pp.card)
    for fam in cards.probes or []:
        for pj in fam.judges:
            add(pj, fam.family, ALL, ALL, pj.overall)
            for lc in pj.languages:
                add(pj, fam.family, lc.lang, ALL, lc.card)
                for pc in lc.perturbations:
                    add(pj, fam.family, lc.lang, pc.perturbation, pc.card)
            for pc in pj.probes:
                add(pj, fam.family, ALL, pc.perturbation, pc.card)
    return out


def table(cards: Any, run: str = "") -> pa.Table:
    columns: list[Any] = list(zip(*rows(cards, run), strict=True)) or [[] for _ in SCHEMA]
    return pa.table([pa.array(list(c), f.type) for c, f in zip(columns, SCHEMA, strict=True)], schema=SCHEMA)

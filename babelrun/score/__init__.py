"""Reliability cards from the counted records: per judge, per language, per perturbation.

The package re-exports what its callers import: the cards' types and cards.json's codec
(``cards``), the columnar pass that computes them (``columnar``: ``score``, ``cells``), the
one ``Interval`` and the column helpers. Beside them: ``metrics`` (the metric registry and
the per-item sums), ``stats`` (intervals, tests, the number formatter), ``agentic``,
``pointwise``, ``paired`` (two runs compared), ``composite`` (mitigation judges), ``verdict``,
``tidy`` (the long table) and ``run`` (a run directory's cards).
"""

from __future__ import annotations

from .cards import (
    SCHEMA_VERSION,
    Card,
    Cards,
    Change,
    CompositeCard,
    FamilyCards,
    JudgeCards,
    LanguageCard,
    LanguageDrift,
    McNemar,
    PerturbationCard,
    RunMeta,
    decode,
    encode,
)
from .columnar import SCORING_COLUMNS, SEPARATE_KINDS, UNSCORED_KINDS, cells, score
from .columns import by_cell_and_item, codes, item_bits, lookup
from .stats import ROUND, Interval, rounded

__all__ = ["ROUND", "SCHEMA_VERSION", "SCORING_COLUMNS", "SEPARATE_KINDS", "UNSCORED_KINDS", "Card", "Cards",
           "Change", "CompositeCard", "FamilyCards", "Interval", "JudgeCards", "LanguageCard", "LanguageDrift",
           "McNemar", "PerturbationCard", "RunMeta", "by_cell_and_item", "cells", "codes", "decode", "encode",
           "item_bits", "lookup", "rounded", "score"]

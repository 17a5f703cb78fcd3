"""Language-switch invariance (the Judge-LS protocol) on a parallel corpus.

In a parallel corpus (UDHR units, FLORES lines) the same unit exists in every language with
the same ``ref_id``. For the same judge, unit, perturbation, severity and slot order, a
language-invariant judge gives the same verdict in the pivot language and in the target
language. Per judge and target language this reports

- the judgment-flip rate: the verdict (reference / perturbed / tie / invalid) differs;
- the correctness-flip rate: right in one language, wrong in the other;

each with a Wilson interval, and an exact McNemar p-value on correctness (b: right in the
pivot only, c: right in the target only). Only keys judged in both languages count.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import compact, languages
from .score import stats

_COLUMNS = ["judge_id", "judge", "lang", "ref_id", "perturbation", "severity", "order", "verdict"]


class Rate(msgspec.Struct, frozen=True):
    value: float | None
    lo: float | None
    hi: float | None
    n: int


class LanguageSwitch(msgspec.Struct, frozen=True):
    judge: str
    lang: str
    language: str
    matched: int  # keys judged in both the pivot and this language
    judgment_flip: Rate
    correctness_flip: Rate
    right_in_pivot_only: int
    right_in_target_only: int
    mcnemar_p: float


class Invariance(msgspec.Struct, frozen=True):
    pivot: str
    rows: list[LanguageSwitch]


def _rate(k: int, n: int, confidence: float) -> Rate:
    if n == 0:
        return Rate(None, None, None, 0)
    lo, hi = stats.wilson(k, n, confidence)
    return Rate(round(k / n, 4), round(float(lo), 4), round(float(hi), 4), n)


def _keyed(table: pa.Table) -> dict[tuple, str]:
    keys = zip(*(table[c].to_pylist() for c in ("ref_id", "perturbation", "severity", "order")), strict=True)
    return dict(zip(keys, table["verdict"].to_pylist(), strict=True))


def compare(data: pa.Table, pivot: str, confidence: float = 0.95) -> Invariance:
    """Flip rates of every judge and target language against ``pivot``, from counted records."""
    pivot = languages.normalize(pivot)
    data = data.filter(pc.not_equal(data["ref_id"], ""))
    rows = []
    for jid in sorted(set(data["judge_id"].to_pylist())):
        mine = data.filter(pc.equal(data["judge_id"], jid))
        name = mine["judge"][0].as_py()
        base = _keyed(mine.filter(pc.equal(mine["lang"], pivot)))
        for lang in sorted(set(mine["lang"].to_pylist()) - {pivot}):
            other = _keyed(mine.filter(pc.equal(mine["lang"], lang)))
            shared = sorted(base.keys() & other.keys())
            a = np.array([base[k] for k in shared], dtype=object)
            b = np.array([other[k] for k in shared], dtype=object)
            right_a, right_b = a == "reference", b == "reference"
            only_a, only_b = int((right_a & ~right_b).sum()), int((right_b & ~right_a).sum())
            rows.append(LanguageSwitch(
                name, lang, languages.name(lang), len(shared),
                _rate(int((a != b).sum()), len(shared), confidence),
                _rate(only_a + only_b, len(shared), confidence),
                only_a, only_b, round(stats.mcnemar_exact(only_a, only_b), 6),
            ))
    return Invariance(pivot, rows)


def run(run_dir: Path, pivot: str = "en", confidence: float = 0.95) -> Invariance:
    return compare(compact.load(Path(run_dir), _COLUMNS), pivot, confidence)


def text(result: Invariance) -> str:
    def fmt(r: Rate) -> str:
        return "–" if r.value is None else f"{r.value:.2f} [{r.lo:.2f}, {r.hi:.2f}]"

    lines = [f"Language-switch invariance against {result.pivot} ({languages.name(result.pivot)})", "",
             "| judge | language | matched | judgment flips | correctness flips | right in pivot only / target only | McNemar p |",
             "|---|---|---:|---|---|---|---:|"]
    for r in result.rows:
        lines.append(f"| {r.judge} | {r.lang} ({r.language}) | {r.matched} | {fmt(r.judgment_flip)} | "
                     f"{fmt(r.correctness_flip)} | {r.right_in_pivot_only} / {r.right_in_target_only} | {r.mcnemar_p:.3g} |")
    if not any(r.matched for r in result.rows):
        lines += ["", "No unit was judged in both languages: is the corpus parallel (UDHR, FLORES)?"]
    return "\n".join(lines) + "\n"

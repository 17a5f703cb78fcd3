"""Views derived from a ReportData that both renderers show (the same numbers in each)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import msgspec

from ..score.agentic import AgenticCard, AgenticLanguageCard
from ..score.cards import Card, Cards, Change, CompositeCard, LanguageCard
from ..score.metrics import REGISTRY
from ..score.pointwise import PointwiseCard, PointwiseLanguage
from ..score.stats import Interval, fmt
from ..score.stats import fmt_interval as number
from ..score.verdict import DECIDED, FAIL, UNCERTAIN, against_bar, items_to_decide
from .recommend import THRESHOLDS


def uncertain_text(card) -> str:
    """Why an uncertain card has no ✓/✗, with roughly how many items would decide it."""
    need = items_to_decide(card.reliability, card.items)
    more = f"; about {need} items would decide it" if need is not None else ""
    return f"uncertain: R's interval straddles the {THRESHOLDS.reliability} bar{more}"


def stopped_text(card) -> str:
    """An early-stopped card's mark ('' when it ran to the end): why its interval is what it is."""
    stopped = getattr(card, "stopped", None)
    return f"{stopped}: its interval holds at every n" if isinstance(stopped, str) else ""

# The card metrics a mitigation's change is shown for, with their labels (score/metrics.REGISTRY).
COMPARED = tuple((m.name, m.header) for m in REGISTRY if m.compared)
# The reports' metric table: items, then every registered metric, in the registry's order.
# (A ``sampled`` metric, on the cards of judges asked several samples only, is not a column.)
TABLE_METRICS = tuple(m for m in REGISTRY if not m.sampled)
METRIC_HEADER = ["items", *(m.header for m in TABLE_METRICS)]
METRIC_RATE_COLUMNS = frozenset(1 + i for i, m in enumerate(TABLE_METRICS, 1) if m.rate)  # with the label column


def metric_cells(card: Card, remarks: dict[str, Callable[[Card], str]]) -> list[str]:
    """A card's cells of the metric table (without its label): items, then each registered
    metric (``value [lo, hi]``; a rate as its value alone, 0 where undefined), followed by the
    renderer's remark for the metric's ``flag`` (``remarks[flag](card)``; none if absent)."""
    cells = [str(card.items)]
    for m in REGISTRY:
        if m.sampled:  # not a column: on the cards of judges asked several samples only
            continue
        iv = getattr(card, m.name)
        text = fmt(iv.value or 0) if m.rate else number(iv, m.signed)
        remark = remarks.get(m.flag) if m.flag is not None else None
        cells.append(text + (remark(card) if remark is not None else ""))
    return cells


class MitigationRow(msgspec.Struct, frozen=True):
    """A mitigation judge beside its base, as both renderers show it."""

    card: CompositeCard
    changes: list[Change | None]  # overall, one per COMPARED metric (None: not compared)
    targeted: list[bool]  # per COMPARED metric: what the mitigation is meant to move
    mcnemar_p: float | None
    note: str  # what else its kind measures: the escalation rate, the slot bias


def mitigation_rows(cards: Cards) -> list[MitigationRow]:
    rows = []
    for comp in cards.composites:
        overall = comp.change[0] if comp.change else None
        by_metric = {c.metric: c for c in overall.changes} if overall else {}
        note = (f"escalated {number(comp.escalation_rate)}" if comp.escalation_rate is not None
                else f"slot bias β = {comp.slot_bias['all']:+.2f} (pooled; {comp.calibration_items} held-out items)"
                if comp.slot_bias is not None else "")
        rows.append(MitigationRow(comp, [by_metric.get(m) for m, _ in COMPARED],
                                  [m in comp.targets for m, _ in COMPARED],
                                  overall.mcnemar.p if overall else None, note))
    return rows


class LeaderRow(msgspec.Struct, frozen=True):
    judge: str
    judge_id: str
    run: str
    card: Card | AgenticCard | PointwiseCard
    worst: LanguageCard | AgenticLanguageCard | PointwiseLanguage | None  # the language with the lowest R
    below: int                  # languages whose R interval lies under the deployment threshold (fail)
    languages: int              # languages the plan asked for in this family (cards + not judged)
    family: str = "degradation"  # degradation | pairs:<set> | agentic: where the numbers come from
    not_judged: int = 0         # planned languages without a card (cards.json ``not_judged``)
    uncertain: int = 0          # languages whose R interval straddles the threshold

    def below_text(self) -> str:
        """``below/languages``, with the uncertain languages beside: ``1/4 (+2 ?)``."""
        return f"{self.below}/{self.languages}" + (f" (+{self.uncertain} ?)" if self.uncertain else "")


def _r(card) -> float:
    return -1.0 if card.reliability.value is None else card.reliability.value


def leaderboard(data) -> list[LeaderRow]:
    """Every judge of the report's runs in every item family, best overall R first within a
    family (degradation first, then the labelled sets, then agentic); ties by name and id."""
    order = {"degradation": 0, "agentic": 2, "pointwise": 3}
    rows = []
    for run, family, jc in data.scored():
        rated = [lc for lc in jc.languages if lc.card.reliability.value is not None]
        worst = min(rated, key=lambda lc: (lc.card.reliability.value, lc.lang)) if rated else None
        bars = [against_bar(lc.card.reliability, THRESHOLDS.reliability) for lc in rated]
        missing = {n.lang for n in run.cards.not_judged if n.family == family and n.judge in (None, jc.judge)}
        rows.append(LeaderRow(jc.judge, jc.judge_id, run.name, jc.overall, worst, bars.count(FAIL),
                              len(jc.languages) + len(missing - {lc.lang for lc in jc.languages}),
                              family, len(missing), bars.count(UNCERTAIN)))
    return sorted(rows, key=lambda r: (order.get(r.family, 1), r.family, -_r(r.card), r.judge, r.judge_id))


NOTES_SHOWN = 24  # note lines per judge: a 500-language run would otherwise print one per card


def planned_items(cards: Cards) -> dict[str, int]:
    """Language -> the degradation items the plan emitted for it (the perturbation audit)."""
    out: dict[str, int] = {}
    for row in cards.perturbation_audit:
        if ":" not in row.perturbation:  # plain degradations (families are named family:…)
            out[row.lang] = out.get(row.lang, 0) + row.emitted
    return out


def card_notes(judge, planned: dict[str, int] | None = None) -> list[tuple[str, str]]:
    """(label, note) for each card of a judge that is uncertain, stopped early or, given the
    ``planned`` items per language, judged on fewer (a budget, ``--limit`` or Ctrl-C ended
    the run first: how far it got): overall, its languages, then its perturbation cards; at
    most ``NOTES_SHOWN``, then a count of the rest."""
    cards = [("all", judge.overall, None)]
    for lc in getattr(judge, "languages", []):
        cards.append((f"{lc.lang} ({lc.language})", lc.card, (planned or {}).get(lc.lang)))
        cards += [(f"{lc.lang} / {pc.perturbation}", pc.card, None) for pc in getattr(lc, "perturbations", [])]
    notes = []
    for label, card, of in cards:
        stopped = stopped_text(card)
        partial = (f"judged {card.items} of {of} planned items" if of is not None and card.items < of and not stopped
                   else "")
        text = "; ".join(t for t in (uncertain_text(card) if card.verdict == UNCERTAIN else "", stopped, partial) if t)
        if text:
            notes.append((label, text))
    if len(notes) > NOTES_SHOWN:
        notes = notes[:NOTES_SHOWN] + [("…", f"{len(notes) - NOTES_SHOWN} more cards uncertain or stopped early "
                                        "(cards.json has each)")]
    return notes


def flags(card) -> str:
    """What a card's verdict withholds or warns of, in words ('' when nothing)."""
    out = []
    if card.verdict == UNCERTAIN:
        out.append(uncertain_text(card))
    elif card.verdict not in (None, *DECIDED):
        out.append(f"no verdict: {card.verdict}")
    if card.below_chance:
        out.append("accuracy below chance: prefers the degraded answer (κ_ord is consistency, not correctness)")
    return "; ".join(out)


def audit_cells(cards: Cards) -> dict[tuple[str, str], list[int]]:
    """(language, perturbation) -> [emitted, skipped, merged], all severities together."""
    cells: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for row in cards.perturbation_audit:
        cell = cells[(row.lang, row.perturbation)]
        cell[0] += row.emitted
        cell[1] += row.skipped
        cell[2] += row.merged
    return cells


def audit_cell(counts: list[int]) -> str:
    """``emitted / skipped``, with ``+merged`` when severities were merged."""
    emitted, skipped, merged = counts
    return f"{emitted} / {skipped}" + (f" +{merged}" if merged else "")


def ranking(judges: list[str], ranks: list[list[int]], lang: int) -> str:
    """Judges best first in one language; '>' between ranks, '=' within a tie."""
    order = sorted(range(len(judges)), key=lambda j: (ranks[j][lang], judges[j]))
    text = judges[order[0]]
    for prev, j in zip(order, order[1:], strict=False):
        text += (" = " if ranks[j][lang] == ranks[prev][lang] else " > ") + judges[j]
    return text


def cbc_rows(c) -> list[tuple[str, str, str]]:
    """(language, raw ranking, calibrated ranking) per language of a Calibration."""
    return [(lang, ranking(c.judges, c.ranks_raw, i), ranking(c.judges, c.ranks_calibrated, i))
            for i, lang in enumerate(c.langs)]


# ---- the answer at a glance: R per judge × language, one colour scale everywhere ----------

def band(value: float | None, threshold: float = THRESHOLDS.reliability) -> str:
    """R's colour band, the same in the matrix, the cards, the leaderboard and the plots:
    ``bad`` below the deployment threshold, ``near`` within 0.10 above it, ``good`` beyond,
    ``none`` where R is undefined."""
    if value is None:
        return "none"
    return "bad" if value < threshold else "near" if value < threshold + BAND_WIDTH else "good"


BAND_WIDTH = 0.10
BAND_COLOURS = {"good": "#cdebc5", "near": "#fff0b3", "bad": "#f5c6c6", "none": "#e8e8e8"}


class MatrixCell(msgspec.Struct, frozen=True):
    """One judge in one planned language. ``status``: ``pass`` (R's interval at or above the
    threshold), ``fail`` (below), ``uncertain`` (straddling it), ``undefined`` (records, but R
    could not be computed), or ``not judged`` (planned, no counted records; ``note`` says why).
    ``flags``: further marks for the cell (another card family may add its own, e.g. a worse-than-chance warning)."""

    status: str
    reliability: Interval | None = None
    items: int = 0
    note: str | None = None
    flags: list[str] = []


class MatrixJudge(msgspec.Struct, frozen=True):
    judge: str
    judge_id: str
    run: str


class Matrix(msgspec.Struct, frozen=True):
    """R for every judge (columns) in every planned language (rows). ``cells[i][j]``: language
    i, judge j; None where judge j's run did not plan language i (several runs in one report)."""

    judges: list[MatrixJudge]
    langs: list[tuple[str, str]]  # (code, name)
    cells: list[list[MatrixCell | None]]

    def sorted_rows(self, by: int | None = None) -> list[int]:
        """Row order: by language code (``by`` None), or lowest R first in judge ``by``'s column
        (``by`` -1: lowest R of any judge). Cells without R go last, then by code."""
        def low(row: list[MatrixCell | None]) -> float:
            cells = row if by == -1 else [row[by]]
            values = [c.reliability.value for c in cells
                      if c is not None and c.reliability is not None and c.reliability.value is not None]
            return min(values) if values else float("inf")

        order = range(len(self.langs))
        if by is None:
            return sorted(order, key=lambda i: self.langs[i][0])
        return sorted(order, key=lambda i: (low(self.cells[i]), self.langs[i][0]))


def _planned_langs(run) -> dict[str, str]:
    """Languages a run planned: those its plan emitted items for, and those it has cards for."""
    from ..core import languages

    out = {row.lang: languages.name(row.lang) for row in run.cards.perturbation_audit if row.emitted}
    for jc in run.cards.judges:
        out.update((lc.lang, lc.language) for lc in jc.languages)
    return out


def _matrix_cell(card, t: float) -> MatrixCell:
    """A card's cell: its verdict where the card has one (too few items and weak segmentation
    give none: the number shows, unmarked), and its flags (below chance)."""
    r = card.reliability
    if r.value is None:
        status = "undefined"
    elif card.verdict in DECIDED:
        status = card.verdict
    elif card.verdict is None:
        status = against_bar(r, t)
    else:
        status = "undefined"
    flags = (["below chance"] if card.below_chance else []) + (
        [card.verdict] if card.verdict not in (None, *DECIDED) else [])
    return MatrixCell(status, r, card.items, flags=flags)


def matrix(data) -> Matrix:
    """The judge × language matrix of a ReportData: every planned (judge, language) has a cell.
    A column is one judge in one item family (degradation, a labelled-pair set, agent
    trajectories): families are never pooled, so a judge audited on several has a column each."""
    t = data.thresholds.reliability
    columns = data.scored()
    planned = {run.run_dir: _planned_langs(run) for run in data.runs}
    names = {kv for p in planned.values() for kv in p.items()}
    names |= {(lc.lang, lc.language) for _, _, jc in columns for lc in jc.languages}
    names |= {(n.lang, n.language) for run in data.runs for n in run.cards.not_judged}
    langs = sorted(names)
    row_of = {code: i for i, (code, _) in enumerate(langs)}
    cells: list[list[MatrixCell | None]] = [[None] * len(columns) for _ in langs]
    for j, (run, family, jc) in enumerate(columns):
        if family == "degradation":
            for code in planned[run.run_dir]:
                cells[row_of[code]][j] = MatrixCell("not judged", note="no counted records")
        for n in run.cards.not_judged:
            if n.family == family and n.judge in (None, jc.judge):
                cells[row_of[n.lang]][j] = MatrixCell("not judged", note=n.reason)
        for lc in jc.languages:
            cells[row_of[lc.lang]][j] = _matrix_cell(lc.card, t)
    heads = [MatrixJudge(jc.judge if family == "degradation" else f"{jc.judge} · {family}", jc.judge_id, run.name)
             for run, family, jc in columns]
    return Matrix(heads, langs, cells)


class Action(msgspec.Struct, frozen=True):
    """One mitigation for one judge and the languages that call for it (worst first)."""

    rule: str
    text: str
    langs: list[tuple[str, float]]  # (code, the metric's value)


def actions(data) -> list[tuple[str, str, list[Action]]]:
    """The recommendations grouped: (judge, judge_id, one Action per rule), in report order."""
    from .recommend import ACTIONS

    t = data.thresholds
    by: dict[tuple[str, str], dict[str, list[tuple[str, float]]]] = {}
    for r in data.recommendations:
        # another item family's language is named with it: pairs and agents never pool
        lang = r.lang if r.family == "degradation" else f"{r.lang} ({r.family})"
        by.setdefault((r.judge, r.judge_id), {}).setdefault(r.rule, []).append((lang, r.value))
    worst_first = {"unreadable": -1, "chance": 1, "reliability": 1, "uncertain": 1, "consistency": 1,
                   "position": -1, "verbosity": -1}
    # robustness probes: the largest cue effect first; a master key's lowest accuracy first
    worst_first.update({rule: -1 for rule in ACTIONS if rule.startswith("probe:")}, **{"probe:master_key": 1})
    return [(judge, jid, [Action(rule, ACTIONS[rule].format(t=t),
                                 sorted(langs, key=lambda lv, s=worst_first[rule]: (s * lv[1], lv[0])))
                          for rule, langs in rules.items()])
            for (judge, jid), rules in by.items()]


def agreement_rows(agreement) -> list[tuple[str, str, str, str, int]]:
    """(judge, labelled set, accuracy with interval, κ with its band, n) per judge and set, on
    the both-orders view (an item agrees when both its verdicts do), from ``babelrun agree``."""
    out = []
    for judge in agreement.judges:
        for s in judge.sets:
            f = next((f for f in s.figures if f.view == "both orders"), None)
            if f is None:
                continue
            acc = "–" if f.accuracy is None else f"{f.accuracy:.2f} [{f.lo:.2f}, {f.hi:.2f}]"
            kappa = "–" if f.kappa is None else f"{f.kappa:.2f} ({f.band})"
            out.append((judge.judge, s.set, acc, kappa, f.n))
    return out


# ---- pointwise judges -----------------------------------------------------------------------

POINTWISE_HEADER = ["judge", "language", "items", "R_pw", "discrimination acc.", "tie rate", "margin",
                    "v (longer)", "pad gain", "stability", "scale offset", "invalid"]
SIDE_BY_SIDE_HEADER = ["language", "pairwise judge", "accuracy", "Δ (slot A)", "pointwise judge",
                       "discrimination acc.", "scale offset"]


def pointwise_rows(cards: Cards) -> list[list[str]]:
    """One row per pointwise judge and language (``all`` first), as plain text cells."""
    rows = []
    for jc in cards.pointwise or []:
        for label, card, offset in [("all", jc.overall, None)] + [
                (f"{lc.lang} ({lc.language})", lc.card, lc.scale_offset) for lc in jc.languages]:
            rows.append([jc.judge, label, str(card.items), number(card.reliability), number(card.discrimination),
                         number(card.tie_rate), number(card.margin, signed=True), number(card.verbosity),
                         number(card.verbosity_gain, signed=True), number(card.stability),
                         number(offset, signed=True), number(card.invalid_rate)])
    return rows


def side_by_side_rows(cards: Cards) -> list[list[str]]:
    """Each language's pairwise judges (accuracy, position bias Δ) beside its pointwise
    judges (discrimination, scale offset): which failure this run's judges suffer more."""
    if not cards.pointwise or not cards.judges:
        return []
    pair = {(j.judge, lc.lang): lc.card for j in cards.judges for lc in j.languages}
    point = {(j.judge, lc.lang): lc for j in cards.pointwise for lc in j.languages}
    langs = sorted({lang for _, lang in pair} & {lang for _, lang in point})
    rows = []
    for lang in langs:
        for pj in cards.judges:
            for qj in cards.pointwise:
                a, b = pair.get((pj.judge, lang)), point.get((qj.judge, lang))
                if a is None or b is None:
                    continue
                rows.append([f"{lang} ({b.language})", pj.judge, number(a.accuracy), number(a.position_bias, True),
                             qj.judge, number(b.card.discrimination), number(b.scale_offset, signed=True)])
    return rows


def self_preference_rows(sp) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of ``babelrun self-preference``'s result: per judge with a family, all its
    labelled pairs and the length-neutral ones (the worse output not the longer)."""
    head = ["judge", "family", "pairs", "own worse named", "neutral worse named", "difference", "Fisher p",
            "self-preference s", "paired b / c (McNemar p)"]
    rows = [[c.judge, c.family, label, number(p.own_worse), number(p.neutral), number(p.difference, signed=True),
             "–" if p.fisher_p is None else f"{p.fisher_p:.3g}", number(p.self_preference),
             "–" if p.paired_p is None else f"{p.paired_b} / {p.paired_c} ({p.paired_p:.3g})"]
            for c in sp.cards for label, p in (("all", c.all_pairs), ("length-neutral", c.length_neutral))]
    return head, rows


SPEND_HEADER = ["run", "judge", "language", "fresh", "retried", "batch", "cached calls", "total"]
_SPEND_KINDS = ("fresh", "retried", "batch")


def spend_rows(data) -> list[list[str]]:
    """The cost ledger (stats.json ``spend``, every audit process summed) per run, judge and
    language, a judge's total first: amounts in the judge's currency; cached calls cost none
    (docs/stopping.md). Empty when no judge has a price."""
    rows = []
    for run in data.runs:
        for j in run.stats:
            spend = j.spend
            if not spend:
                continue
            cur = spend.get("currency", "USD")
            calls = spend.get("calls_by_kind", {})

            def money(v: float | None, cur: str = cur) -> str:
                return "–" if v is None else f"{v:,.4f} {cur}"

            by_kind = spend.get("by_kind", {})
            rows.append([run.name, j.judge, "all", *(money(by_kind.get(k)) for k in _SPEND_KINDS),
                         str(calls.get("cached", 0)), money(spend.get("total", 0.0))])
            lang_calls = spend.get("calls_by_language", {})
            for lang, row in spend.get("by_language", {}).items():
                rows.append([run.name, j.judge, lang, *(money(row.get(k)) for k in _SPEND_KINDS),
                             str(lang_calls.get(lang, {}).get("cached", 0)), money(sum(row.values()))])
    return rows

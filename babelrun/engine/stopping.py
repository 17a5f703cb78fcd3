"""Anytime-valid early stopping per card cell (``stopping:`` in the manifest; docs/stopping.md).

A cell is one (judge, language) — or (judge, language, perturbation) with
``per_perturbation`` — of plain degradation items. Its items enter in a seeded random order
(``Plan.ordered``), so the items judged when a cell stops are a uniform random sample of it,
and, the cell's items being draws from the judge's population of items, an i.i.d. sequence.

After every item whose two presentations are both in, R's interval is recomputed from
confidence *sequences* — intervals that hold at every n at once, so stopping on them keeps
their level (Howard, Ramdas, McAuliffe & Sekhon 2021, *Time-uniform, nonparametric,
nonasymptotic confidence sequences*, Ann. Statist. 49(2); Waudby-Smith & Ramdas 2023,
*Estimating means of bounded random variables by betting*, JRSS-B 86(1)). Each of the
card's per-item proportions gets the hedged-capital *betting* CS (Waudby-Smith & Ramdas 2023, Thm 3; ``Betting``; the
empirical-Bernstein CS of their Thm 2 is kept as ``EmpiricalBernstein``) at level α/k (a union bound over the k
streams), intersected over n; R's interval follows from R's formula (``score/metrics.py``),
which is monotone in each argument: increasing in accuracy and κ_ord, decreasing in |Δ| and
in v above ½. v's two halves are each the mean, over the items of one length stratum, of
the item's share of decisive verdicts that chose the longer answer (the card's pooled ratio
when every presentation is decisive; an approximation of it otherwise: docs/stopping.md).

The decision is a function of the log: items are fed in the cell's seeded order, a prefix at
a time (an item finished early waits for the ones before it; an item that failed is passed
over in this process), so a resumed run, a merged run and a rerun reach the same stop from
the same records. Keys of a stopped cell's items after its stop are *not needed*: not
judged, written to ``stopping.json``; a run without ``stopping`` judges them. The items up to
the stop are the card's, every sample of them: a judge asked ``samples: k`` decides on
each presentation's sample 0, and the later samples of the items in the prefix are judged
in every run, whichever were in flight when it stopped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from ..spec import StoppingSpec

STOPPING_JSON = "stopping.json"
# The per-item streams: accuracy, Δ (mapped to [0, 1]), κ_ord, and v's four sums.
STREAMS = ("acc", "delta", "kappa", "lw", "lb")
LENGTH_GAP = 0.10  # as score.metrics.LENGTH_GAP


class EmpiricalBernstein:
    """The predictable plug-in empirical-Bernstein confidence sequence for the mean of
    [0, 1]-valued i.i.d. observations (Waudby-Smith & Ramdas 2023, Thm 2), two-sided at
    level ``alpha``, running-intersected. O(1) per observation."""

    __slots__ = ("alpha", "c", "hi", "lo", "log_term", "mu", "n", "s_lam", "s_lamx", "s_psi", "sq")

    def __init__(self, alpha: float, c: float = 0.5):
        self.alpha, self.c = alpha, c
        self.log_term = math.log(2.0 / alpha)
        self.n = 0
        self.mu = 0.5  # μ̂_{t-1}: (½ + Σx) / (t + 1)
        self.sq = 0.25  # σ̂²·(t+1): ¼ + Σ (x_i − μ̂_i)²
        self.s_lam = self.s_lamx = self.s_psi = 0.0
        self.lo, self.hi = 0.0, 1.0

    def update(self, x: float) -> None:
        t = self.n + 1
        var_prev = self.sq / t  # σ̂²_{t−1}
        lam = min(math.sqrt(2.0 * self.log_term / (var_prev * t * math.log(1.0 + t))), self.c)
        v = 4.0 * (x - self.mu) ** 2
        psi = (-math.log(1.0 - lam) - lam) / 4.0
        self.s_lam += lam
        self.s_lamx += lam * x
        self.s_psi += v * psi
        self.n = t
        total = self.mu * t + x  # ½ + Σx over t + 1
        self.mu = total / (t + 1)
        self.sq += (x - self.mu) ** 2
        centre = self.s_lamx / self.s_lam
        margin = (self.log_term + self.s_psi) / self.s_lam
        self.lo = max(self.lo, centre - margin)
        self.hi = min(self.hi, centre + margin)
        if self.lo > self.hi:  # the CS is empty: at least α's worth of bad luck; keep a point
            self.lo = self.hi = (self.lo + self.hi) / 2


class Betting:
    """The hedged-capital betting confidence sequence for the mean of [0, 1]-valued i.i.d.
    observations (Waudby-Smith & Ramdas 2023, §4, Thm 3, with the predictable plug-in bets of
    eq. 26–27), on a grid of candidate means, running-intersected: m leaves the sequence once
    the capital of betting against it reaches 1/α. Much tighter than the empirical-Bernstein
    sequence near 0 and 1, where a reliable judge's proportions are. O(grid) per observation."""

    def __init__(self, alpha: float, grid: int = 1000, c: float = 0.75):
        import numpy as np

        self.alpha, self.c = alpha, c
        self.m = np.linspace(0.0, 1.0, grid + 1)
        self.log_up = np.zeros(grid + 1)
        self.log_down = np.zeros(grid + 1)
        self.alive = np.ones(grid + 1, dtype=bool)
        self.threshold = math.log(1.0 / alpha)
        self.log_term = math.log(2.0 / alpha)
        self.step = 1.0 / grid
        self.n, self.mu, self.sq = 0, 0.5, 0.25
        self.lo, self.hi = 0.0, 1.0

    def update(self, x: float) -> None:
        import numpy as np

        t = self.n + 1
        lam = math.sqrt(2.0 * self.log_term / ((self.sq / t) * t * math.log(1.0 + t)))
        m = self.m
        with np.errstate(divide="ignore"):
            up = np.minimum(lam, self.c / np.maximum(m, 1e-12))
            down = np.minimum(lam, self.c / np.maximum(1.0 - m, 1e-12))
        self.log_up += np.log1p(up * (x - m))
        self.log_down += np.log1p(-down * (x - m))
        hedged = np.logaddexp(self.log_up, self.log_down) - math.log(2.0)
        self.alive &= hedged < self.threshold
        self.n = t
        self.mu = (self.mu * t + x) / (t + 1)
        self.sq += (x - self.mu) ** 2
        idx = np.flatnonzero(self.alive)
        if idx.size:  # widened by one grid step: the grid's resolution, kept conservative
            self.lo = max(self.lo, float(m[idx[0]]) - self.step)
            self.hi = min(self.hi, float(m[idx[-1]]) + self.step)
        if self.lo > self.hi:
            self.lo = self.hi = (self.lo + self.hi) / 2


def r_of(acc: float, kappa: float, abs_delta: float, v: float) -> float:
    """R's formula (score/metrics.py from_sums), for one set of values."""
    return (0.6 * acc + 0.4 * kappa) * (1.0 - 0.8 * abs_delta) * (1.0 - 0.7 * max(0.0, 2.0 * v - 1.0))


class Sequence:
    """R's anytime-valid interval over one cell's items, fed an item at a time."""

    def __init__(self, confidence: float):
        alpha = (1.0 - confidence) / len(STREAMS)
        self.cs = {name: Betting(alpha) for name in STREAMS}
        self.lo, self.hi = 0.0, 1.0
        self.n = 0

    def add(self, item: dict[str, float | None]) -> None:
        for name, cs in self.cs.items():
            x = item.get(name)
            if x is not None:  # lw / lb: only items of that length stratum
                cs.update(x)
        self.n += 1
        lo, hi = self.bounds()
        self.lo, self.hi = max(self.lo, lo), min(self.hi, hi)
        if self.lo > self.hi:
            self.lo = self.hi = (self.lo + self.hi) / 2

    def bounds(self) -> tuple[float, float]:
        """R's interval at this n (before the running intersection)."""
        cs = self.cs
        d_lo, d_hi = 2 * cs["delta"].lo - 1, 2 * cs["delta"].hi - 1
        abs_max = max(abs(d_lo), abs(d_hi))
        abs_min = 0.0 if d_lo <= 0 <= d_hi else min(abs(d_lo), abs(d_hi))
        v_lo, v_hi = (cs["lw"].lo + cs["lb"].lo) / 2, (cs["lw"].hi + cs["lb"].hi) / 2
        # v undefined (no pairs of a kind) counts as factor 1, inside [f(v_hi), 1] already
        lo = r_of(cs["acc"].lo, cs["kappa"].lo, abs_max, v_hi)
        hi = r_of(cs["acc"].hi, cs["kappa"].hi, abs_min, v_lo)
        return lo, hi


def item_stats(first: tuple[str, str, int, int], second: tuple[str, str, int, int]) -> dict[str, float | None]:
    """An item's per-item observations from its two presentations, each
    (order, verdict, ref_len, pert_len): the same counts as ``score.metrics.item_table``."""
    correct = slot_a = decisive_n = consistent = 0
    lw_n = lw_long = lb_n = lb_long = 0
    verdicts = []
    for order, verdict, ref_len, pert_len in (first, second):
        verdicts.append(verdict)
        is_correct = verdict == "reference"
        decisive = verdict in ("reference", "perturbed")
        correct += is_correct
        if not decisive:
            continue
        decisive_n += 1
        slot_a += is_correct == (order == "ref_first")
        differs = abs(ref_len - pert_len) >= LENGTH_GAP * max(ref_len, pert_len, 1)
        if differs:
            longer_is_ref = ref_len > pert_len
            chose_longer = is_correct == longer_is_ref
            if longer_is_ref:
                lb_n += 1
                lb_long += chose_longer
            else:
                lw_n += 1
                lw_long += chose_longer
    consistent = int(verdicts[0] == verdicts[1] and verdicts[0] in ("reference", "perturbed"))
    slot_b = decisive_n - slot_a
    return {"acc": correct / 2, "delta": ((slot_a - slot_b) / 2 + 1) / 2, "kappa": float(consistent),
            "lw": lw_long / lw_n if lw_n else None, "lb": lb_long / lb_n if lb_n else None}


class CellReport(msgspec.Struct, frozen=True):
    """One cell in ``stopping.json``."""

    cell: str  # "<lang>" or "<lang>/<perturbation>"
    items: int  # the cell's planned items
    n: int  # items fed (the complete prefix)
    stopped_at: int | None  # n when its calls stopped; None: not stopped
    lo: float
    hi: float
    not_needed: int = 0  # keys left unjudged because the cell stopped


class JudgeReport(msgspec.Struct, frozen=True):
    judge: str
    judge_id: str
    cells: list[CellReport]


class StoppingReport(msgspec.Struct, frozen=True):
    on: str
    confidence: float
    min_items: int
    threshold: float
    width: float | None
    judges: list[JudgeReport]


@dataclass
class _Cell:
    name: str
    order: list[str]  # item ids in the seeded order
    sequence: Sequence
    next: int = 0  # the next rank to feed
    stopped_at: int | None = None
    stop_rank: int | None = None  # the rank of the item at which it stopped: the counted prefix ends there
    stop_lo: float = 0.0  # R's interval when it stopped (what the card shows: no later item moves it)
    stop_hi: float = 1.0
    finished: dict[int, dict[str, float | None] | None] = field(default_factory=dict)  # rank → stats (None: failed)


class Stopper:
    """One judge's cells: fed records, says which items are no longer needed."""

    def __init__(self, spec: StoppingSpec, cells: dict[str, list[str]], name: str = "", judge_id: str = ""):
        self.spec, self.name, self.judge_id = spec, name, judge_id
        self.cells = {c: _Cell(c, ids, Sequence(spec.confidence)) for c, ids in cells.items()}
        self.where: dict[str, tuple[_Cell, int]] = {}
        for cell in self.cells.values():
            for rank, iid in enumerate(cell.order):
                self.where[iid] = (cell, rank)
        self._half: dict[str, tuple[str, str, int, int]] = {}
        self.not_needed: dict[str, int] = {}

    def needed(self, item_id: str) -> bool:
        """Whether the item's keys are still to judge: False once its cell has stopped before
        it. An item up to the stop is the card's (its later samples, not yet asked when the
        cell stopped, are asked still: which were in flight then depends on timing)."""
        place = self.where.get(item_id)
        if place is None:
            return True
        cell, rank = place
        return cell.stop_rank is None or rank <= cell.stop_rank

    def skip(self, item_id: str) -> None:
        """Count one key of a stopped cell as not needed."""
        cell = self.where[item_id][0]
        self.not_needed[cell.name] = self.not_needed.get(cell.name, 0) + 1

    @property
    def skipped(self) -> int:
        """Keys counted as not needed in this process."""
        return sum(self.not_needed.values())

    def batch_round(self, item_ids: Iterable[str], size: int) -> set[str]:
        """Of these items (those with keys still to judge), the ones the next provider batch
        takes: every item in no cell, and each undecided cell's ``size`` first in its seeded
        order. A stopped cell's items after its stop are left out (not needed); those up to it
        with keys still to judge (their later samples, after a resume) go."""
        ranks: dict[str, set[int]] = {}
        out: set[str] = set()
        for iid in item_ids:
            place = self.where.get(iid)
            if place is None:
                out.add(iid)
            elif place[0].stopped_at is None:
                ranks.setdefault(place[0].name, set()).add(place[1])
            elif self.needed(iid):
                out.add(iid)
        for name, rs in ranks.items():
            order = self.cells[name].order
            out.update(order[r] for r in sorted(rs)[:size])
        return out

    def feed(self, item_id: str, order: str, ok: bool, verdict: str | None, ref_len: int, pert_len: int) -> None:
        place = self.where.get(item_id)
        if place is None:
            return
        cell, rank = place
        if rank < cell.next or rank in cell.finished:
            return
        if not ok or verdict is None:
            cell.finished[rank] = None  # passed over in this process
            self._half.pop(item_id, None)
        else:
            mine = (order, verdict, ref_len, pert_len)
            other = self._half.pop(item_id, None)
            if other is None or other[0] == order:
                self._half[item_id] = mine
                return
            cell.finished[rank] = item_stats(other, mine)
        self._advance(cell)

    def _advance(self, cell: _Cell) -> None:
        while cell.next in cell.finished:
            stats = cell.finished.pop(cell.next)
            cell.next += 1
            if stats is None or cell.stopped_at is not None:  # past the stop: in flight then, never counted
                continue
            cell.sequence.add(stats)
            if self._decided(cell.sequence):
                cell.stopped_at, cell.stop_rank = cell.sequence.n, cell.next - 1
                cell.stop_lo, cell.stop_hi = cell.sequence.lo, cell.sequence.hi

    def _decided(self, seq: Sequence) -> bool:
        spec = self.spec
        if seq.n < spec.min_items:
            return False
        if spec.on == "width":
            return seq.hi - seq.lo <= (spec.width or 0.0)
        return seq.lo >= spec.threshold or seq.hi < spec.threshold

    def feed_rows(self, rows: Iterable[tuple[str, str, str, str | None, int, int]]) -> None:
        """Records already in the log, (item_id, order, status, verdict, ref_len, pert_len),
        fed in each cell's seeded order (so that a resume decides as the first run would)."""
        ok_rows = [r for r in rows if r[0] in self.where and r[2] == "ok"]
        ok_rows.sort(key=lambda r: (self.where[r[0]][1], r[1]))
        for iid, order, _, verdict, ref_len, pert_len in ok_rows:
            self.feed(iid, order, True, verdict, ref_len, pert_len)

    def report(self) -> JudgeReport:
        return JudgeReport(self.name, self.judge_id, [
            CellReport(c.name, len(c.order), c.sequence.n, c.stopped_at,
                       round(c.stop_lo if c.stopped_at is not None else c.sequence.lo, 6),
                       round(c.stop_hi if c.stopped_at is not None else c.sequence.hi, 6),
                       self.not_needed.get(c.name, 0))
            for c in sorted(self.cells.values(), key=lambda c: c.name)])

    def past_stop(self) -> dict[str, list[str]]:
        """Of each stopped cell, the item ids after its stop: judged (in flight when it
        stopped) but never counted."""
        return {c.name: c.order[c.stop_rank + 1:] for c in self.cells.values() if c.stop_rank is not None}


def log_rows(run_dir: Path, judge_ids: set[str]) -> dict[str, list[tuple[str, str, str, str | None, int, int]]]:
    """The log's records of these judges, as ``Stopper.feed_rows`` takes them: each
    presentation's sample 0 (a judge asked ``samples: k`` stops on its first asks, as it would at k = 1)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..store.log import read_table

    schema = pa.schema([("judge_id", pa.string()), ("item_id", pa.string()), ("order", pa.string()),
                        ("status", pa.string()), ("verdict", pa.string()), ("ref_len", pa.int64()),
                        ("pert_len", pa.int64()), ("sample", pa.int64())])
    table = read_table(run_dir, schema)
    table = table.filter(pc.and_(pc.is_in(table["judge_id"], pa.array(sorted(judge_ids), pa.string())),
                                 pc.equal(pc.fill_null(table["sample"], 0), 0)))
    out: dict[str, list[tuple[str, str, str, str | None, int, int]]] = {}
    cols = [table[n].to_pylist() for n in schema.names[:-1]]
    for jid, *row in zip(*cols, strict=True):
        out.setdefault(jid, []).append(tuple(row))
    return out


class Replayed(msgspec.Struct, frozen=True):
    """One judge's stopping, decided again from the log (``from_log``)."""

    cells: dict[str, CellReport]  # the stopped cells only
    uncounted: set[str]  # item ids past a stop: their records are kept, never counted


_LOG_SCHEMA = (("judge_id", "string"), ("item_id", "string"), ("order", "string"), ("status", "string"),
               ("verdict", "string"), ("ref_len", "int64"), ("pert_len", "int64"), ("kind", "string"),
               ("lang", "string"), ("perturbation", "string"), ("ref_id", "string"),
               ("sample", "int64"))


def from_log(run_dir: Path, spec: StoppingSpec, seed: int, judge_ids: dict[str, str]) -> dict[str, Replayed]:
    """Each judge's stopping decided from its records alone, as the engine decides it (cells
    of plain degradation items in the seeded order, fed a complete prefix at a time; an item
    whose presentation never succeeded is passed over; one not yet judged holds the prefix).
    What a stopped cell's card counts is its prefix up to the stop: the records of items
    after it, judged because they were in flight when it stopped, stay in the log and are
    left out, so a killed and resumed run counts what an uninterrupted one does.
    ``judge_ids``: judge name → id, of the judges stopping applies to."""
    import pyarrow as pa

    from ..plan.order import seeded_cell
    from ..store.log import read_table

    table = read_table(run_dir, pa.schema([(n, getattr(pa, t)()) for n, t in _LOG_SCHEMA]))
    columns = [table[n].to_pylist() for n, _ in _LOG_SCHEMA]
    keys: dict[str, dict[tuple[str, str], tuple[bool, str | None, int, int]]] = {}
    cells: dict[str, dict[str, tuple[str, str]]] = {}  # judge id → item id → (cell, reference id)
    wanted = set(judge_ids.values())
    for jid, iid, order, status, verdict, ref_len, pert_len, kind, lang, pert, ref, sample in zip(*columns,
                                                                                                 strict=True):
        if jid not in wanted or kind != "text":
            continue
        cell = f"{lang}/{pert}" if spec.per_perturbation else lang
        cells.setdefault(jid, {})[iid] = (cell, ref or "")
        mine = keys.setdefault(jid, {})
        if sample:  # the engine decides on each presentation's sample 0 (``log_rows``)
            continue
        if not mine.get((iid, order), (False,))[0]:  # a key's first ok record is its record
            mine[(iid, order)] = (status == "ok", verdict, ref_len or 0, pert_len or 0)
    out: dict[str, Replayed] = {}
    for name, jid in judge_ids.items():
        of_cell: dict[str, list[tuple[str, str]]] = {}
        for iid, (cell, ref) in cells.get(jid, {}).items():
            of_cell.setdefault(cell, []).append((ref, iid))
        ordered = {c: seeded_cell(seed, ids, spec.per_perturbation) for c, ids in of_cell.items()}
        stopper = Stopper(spec, ordered, name, jid)
        for cell_ids in ordered.values():
            for iid in cell_ids:
                for order in ("ref_first", "pert_first"):
                    got = keys[jid].get((iid, order))
                    if got is not None:
                        stopper.feed(iid, order, got[0], got[1], got[2], got[3])
        report = {c.cell: c for c in stopper.report().cells if c.stopped_at is not None}
        out[jid] = Replayed(report, {iid for ids in stopper.past_stop().values() for iid in ids})
    return out


def write_report(run_dir: Path, spec: StoppingSpec, judges: list[JudgeReport]) -> None:
    """``stopping.json`` (atomically): this run's cells, merged over the judges of earlier
    processes (a judge not run now keeps its entry)."""
    path = run_dir / STOPPING_JSON
    old = read_report(run_dir)
    kept = [j for j in (old.judges if old else []) if j.judge_id not in {n.judge_id for n in judges}]
    report = StoppingReport(spec.on, spec.confidence, spec.min_items, spec.threshold, spec.width,
                            sorted(kept + judges, key=lambda j: j.judge))
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(msgspec.json.format(msgspec.json.encode(report)))
    tmp.replace(path)


def read_report(run_dir: Path) -> StoppingReport | None:
    try:
        return msgspec.json.decode((Path(run_dir) / STOPPING_JSON).read_bytes(), type=StoppingReport)
    except (OSError, msgspec.DecodeError):
        return None

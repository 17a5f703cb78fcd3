"""Everything a report shows, gathered once from run directories into typed structs.

``gather`` reads each run directory's cards (given, or rebuilt from the log by
``run.score_run``), ``run.yaml`` (judge identities), ``stats.json``, the counted records
(served models, fingerprints, example failures with the judge's raw reply), the analyses'
results where they were run (each entry of ``analyses.registry.ANALYSES``: its file, decoded as
its result type, in ``RunReport.analyses``), and regenerates the handful of items the examples
need from the run's resolved manifest (records hold no texts).
Renderers (``markdown``, ``html``, ``plots``) only read a ``ReportData``; nothing here
formats text.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..analyses import registry
from ..analyses.agree import Agreement
from ..analyses.calibrate import Calibration
from ..analyses.invariance import Invariance
from ..perturb.probes import name as probe_name
from ..score import diagnose
from ..score.cards import Cards, JudgeCards
from ..score.diagnose import Diagnosis
from ..store import compact
from ..store.stats import JudgeStats
from .recommend import THRESHOLDS, Recommendation, Thresholds, recommend

EXAMPLES_PER_MODE = 3
# Failure modes, in the order the report shows them.
MODES = {
    "perturbed": "the judge chose the degraded answer",
    "tie": "the judge said tie (the gold label is never a tie)",
    "invalid": "the reply was not A, B or tie",
    "order_flip": "the two slot orders gave different answers (an item-level position effect)",
}
_COLUMNS = ["judge_id", "judge", "kind", "item_id", "ref_id", "order", "lang", "perturbation", "severity",
            "verdict", "slot", "raw", "served_model", "fingerprint", "cue"]


class JudgeIdentity(msgspec.Struct, frozen=True):
    judge: str
    judge_id: str
    run_dir: str
    backend: str | None = None  # None: the judge is in the log but no longer in run.yaml
    model: str | None = None
    endpoint: str | None = None
    prompt: str | None = None
    prompt_version: int | None = None
    prompt_language: str | None = None
    served_models: list[str] = []  # as the provider reported them in the records
    fingerprints: list[str] = []


class Reply(msgspec.Struct, frozen=True):
    order: str
    slot: str | None
    verdict: str | None
    raw: str | None


class Example(msgspec.Struct, frozen=True):
    mode: str  # a key of MODES
    judge: str
    judge_id: str
    item_id: str
    lang: str
    perturbation: str
    severity: float
    replies: list[Reply]
    prompt: str | None = None  # None: the item's texts could not be regenerated
    reference: str | None = None
    perturbed: str | None = None
    cue: str | None = None  # a robustness probe's cue (probe|language|text|placement), as recorded


class LogStats(msgspec.Struct, frozen=True):
    """One judge's calls as the log records them (every process that wrote the run): the
    same numbers however often the report is rebuilt. 429s and calls/s are not in records;
    they come from stats.json, which sums every audit process (and keeps each one's entry)."""

    judge: str
    judge_id: str
    records: int
    ok: int
    errors: dict[str, int]  # error records by kind
    calls: int              # attempts, retries included
    retries: int
    latency_ms: dict[str, float | None]  # p50 / p95 / p99 of the ok records
    tokens_in: int
    tokens_out: int


class RunReport(msgspec.Struct, frozen=True):
    run_dir: str
    name: str
    babelrun_version: str
    cards: Cards
    identities: list[JudgeIdentity]
    log_stats: list[LogStats]
    stats: list[JudgeStats]
    elapsed_s: float | None
    examples: list[Example]
    texts_note: str | None  # why the examples' texts are missing, when they are
    stale: list[str] = []  # analysis files older than the log's newest segment
    # analysis name (registry) -> its result, for the analyses run on this run directory
    analyses: dict[str, Any] = {}
    # judges whose replies could not be read, or that refused (score/diagnose.py)
    diagnoses: list[Diagnosis] = []

    def __post_init__(self) -> None:
        # Decoded from msgpack (the plots' child process) the results are plain dicts: typed again.
        types = {a.name: a for a in registry.ANALYSES}
        for name, result in self.analyses.items():
            if isinstance(result, dict) and name in types:
                self.analyses[name] = msgspec.convert(result, types[name].result_type)

    @property
    def calibration(self) -> Calibration | None:
        return self.analyses.get("calibrate")

    @property
    def invariance(self) -> Invariance | None:
        return self.analyses.get("invariance")

    @property
    def agreement(self) -> Agreement | None:
        return self.analyses.get("agree")


class ReportData(msgspec.Struct, frozen=True):
    runs: list[RunReport]
    recommendations: list[Recommendation]
    thresholds: Thresholds = THRESHOLDS

    def judges(self) -> list[tuple[RunReport, JudgeCards]]:
        """Every judge of every run (a judge id seen in an earlier run is not repeated)."""
        seen, out = set(), []
        for run in self.runs:
            for jc in run.cards.judges:
                if jc.judge_id not in seen:
                    seen.add(jc.judge_id)
                    out.append((run, jc))
        return out

    def families(self) -> list[tuple[RunReport, str, object]]:
        """Every judge's cards in every item family, as (run, family, judge cards): the
        degradation cards (``JudgeCards``), each labelled-pair set's (``pairs:<set>``), the
        agentic ones (``AgenticJudgeCards``). Families are never pooled; a judge id seen in
        an earlier run is not repeated within a family."""
        seen, out = set(), []
        for run in self.runs:
            sets = [("degradation", run.cards.judges), *((fc.family, fc.judges) for fc in run.cards.pairs),
                    ("agentic", run.cards.agentic)]
            for family, judges in sets:
                for jc in judges:
                    if (family, jc.judge_id) not in seen:
                        seen.add((family, jc.judge_id))
                        out.append((run, family, jc))
        return out

    def scored(self) -> list[tuple[RunReport, str, object]]:
        """``families()`` and every pointwise judge (family ``pointwise``, R_pw on its own scale):
        what the judge × language matrix, the leaderboard and the recommendations rank."""
        out, seen = self.families(), set()
        for run in self.runs:
            for jc in run.cards.pointwise or []:
                if jc.judge_id not in seen:
                    seen.add(jc.judge_id)
                    out.append((run, "pointwise", jc))
        return out

    def analysis(self, name: str) -> list[tuple[RunReport, Any]]:
        """(run, result) of the analysis ``name`` (a registry entry) for every run it was run on;
        the first only for one whose result spans several runs (the same in each)."""
        found = [(r, r.analyses[name]) for r in self.runs if r.analyses.get(name) is not None]
        spans = any(a.spans_runs for a in registry.ANALYSES if a.name == name)
        return found[:1] if spans else found

    @property
    def calibration(self) -> Calibration | None:
        return next((c for _, c in self.analysis("calibrate")), None)

    @property
    def invariance(self) -> list[Invariance]:
        return [inv for _, inv in self.analysis("invariance")]


def _optional(path: Path, type_):
    """A JSON file decoded as ``type_``, or None when absent or of another shape (written by
    another babelrun version)."""
    try:
        return msgspec.json.decode(path.read_bytes(), type=type_)
    except (FileNotFoundError, msgspec.DecodeError):
        return None


def _plain(column) -> list:
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    return array.to_pylist()


def _identities(run_dir: Path, info, seen: dict[str, dict[str, dict[str, None]]]) -> list[JudgeIdentity]:
    """``seen``: per judge id, each identity column's distinct values in the order the records
    first show them (``_Scan``)."""
    from ..judges.prompt import TEMPLATES

    specs = {info.judge_ids.get(s.name): s for s in info.manifest.judges}

    def distinct(column: str, jid: str) -> list[str]:
        return list(seen[jid][column])

    ids = {jid: distinct("judge", jid)[-1] for jid in seen}  # a renamed judge: its last name
    for jid, spec in specs.items():
        ids.setdefault(jid, spec.name)
    out = []
    for jid, name in sorted(ids.items(), key=lambda kv: (kv[1], kv[0])):
        served = sorted(distinct("served_model", jid)) if jid in seen else []
        prints = sorted(distinct("fingerprint", jid)) if jid in seen else []
        spec = specs.get(jid)
        if spec is None:
            out.append(JudgeIdentity(name, jid, str(run_dir), served_models=served, fingerprints=prints))
            continue
        if isinstance(spec.prompt, str):
            template = TEMPLATES.get(spec.prompt)
            prompt, version = spec.prompt, template.version if template else None
        else:  # the user's own template: where it came from (its text is in run.yaml)
            prompt, version = spec.prompt.source or "inline", None
        if spec.protocol != "pairwise":
            prompt = f"{prompt} ({spec.protocol})"
        out.append(JudgeIdentity(name, jid, str(run_dir), spec.backend, spec.model or None, spec.endpoint,
                                 prompt, version, spec.prompt_language, served, prints))
    return out + _composite_identities(run_dir, info)


def _composite_identities(run_dir: Path, info) -> list[JudgeIdentity]:
    """Mitigation judges: their rule as the backend, their inner judges as the model."""
    from ..score.composite import composite_id
    from ..spec import inner_judges

    return [JudgeIdentity(c.name, composite_id(c, info.judge_ids), str(run_dir), f"{c.kind} (composite)",
                          " + ".join(inner_judges(c)))
            for c in info.manifest.composites]


_NARROW = ["judge_id", "judge", "kind", "item_id", "item_key", "verdict", "served_model", "fingerprint",
           "perturbation"]
_IDENTITY = ("judge", "served_model", "fingerprint")
SELF_MATCH = probe_name("self_match")  # a robustness probe whose tie is the gold
_VERDICT_MODES = [m for m in MODES if m != "order_flip"]


def _gold(t: pa.Table) -> pa.Array:
    """The rows whose verdict can be a failure: not a tie probe's, nor a tie where a tie is
    the gold (a tie-labelled pair; a robustness probe's self match)."""
    kind = t["kind"].cast(pa.string())
    gold = pc.invert(pc.is_in(kind, pa.array(["tie_probe"])))
    gold = pc.and_(gold, pc.invert(pc.and_(pc.equal(kind, "labelled_tie"),
                                           pc.equal(t["verdict"].cast(pa.string()), "tie"))))
    if "perturbation" in t.column_names:
        gold = pc.and_(gold, pc.invert(pc.and_(pc.equal(t["perturbation"], SELF_MATCH),
                                               pc.equal(t["verdict"], "tie"))))
    return pc.fill_null(gold, False)


class _Scan:
    """What the report needs of the counted records, gathered one row group at a time, so
    that memory does not grow with the number of records: each judge id's identity values
    (``seen``), and per judge and failure mode the ``keep`` first item ids (by id) that show
    it. ``keep`` is ``n`` per mode times the modes: ``_pick`` passes over at most the items
    the judge's earlier modes showed, so these are every id the whole-table choice could
    reach. Order flips need an item's two orders, which may lie in different row groups: the
    decisive rows keep 13 bytes each (key, right, judge), in arrays of the file's length
    allocated once (per row group parts kept in a list pinned 20 MB more of the heap)."""

    def __init__(self, n: int, rows: int):
        self.n, self.keep = n, n * len(MODES)
        self.seen: dict[str, dict[str, dict[str, None]]] = {}
        self.first: dict[tuple[str, str], list[str]] = {}  # (judge id, mode) -> sorted ids
        self.judges: list[str] = []  # the judges of decisive rows, in order seen
        self.key = np.zeros(rows, dtype=np.uint64)  # the item's 60 bits (compact.py): sorts as integers
        self.right = np.zeros(rows, dtype=bool)
        self.judge = np.full(rows, -1, dtype=np.int32)  # index in ``judges``; -1: not a decisive gold row
        self.rows = 0

    def add(self, t: pa.Table) -> None:
        base, self.rows = self.rows, self.rows + t.num_rows
        for jid in _plain(pc.unique(t["judge_id"])):
            if jid:
                mine = t.filter(pc.equal(t["judge_id"], jid))
                values = self.seen.setdefault(jid, {c: {} for c in _IDENTITY})
                for column in _IDENTITY:
                    values[column].update((v, None) for v in _plain(pc.unique(mine[column])) if v)
        gold = _gold(t)
        at = np.flatnonzero(gold.to_numpy(zero_copy_only=False)) + base  # the gold rows' places in the file
        t = pa.table({"judge_id": t["judge_id"], "item_id": t["item_id"], "item_key": t["item_key"],
                      "verdict": t["verdict"]}).filter(gold)
        for jid in pc.unique(t["judge_id"]).cast(pa.string()).to_pylist():
            mask = pc.equal(t["judge_id"], jid)
            mine = t.filter(mask)
            verdict = mine["verdict"].cast(pa.string())
            for mode in _VERDICT_MODES:
                ids = pc.unique(mine["item_id"].filter(pc.equal(verdict, mode)))
                self._merge(jid, mode, ids.take(pc.sort_indices(ids)[: self.keep]).to_pylist(), unique=True)
            decisive = pc.fill_null(pc.is_in(verdict, pa.array(["reference", "perturbed"])),
                                    False).to_numpy(zero_copy_only=False)
            rows = np.flatnonzero(decisive)
            where = at[np.flatnonzero(mask.to_numpy(zero_copy_only=False))][rows]
            if jid not in self.judges:
                self.judges.append(jid)
            self.judge[where] = self.judges.index(jid)
            self.key[where] = mine["item_key"].to_numpy()[rows]
            self.right[where] = pc.equal(verdict, "reference").to_numpy(zero_copy_only=False)[rows]

    def _merge(self, jid: str, mode: str, ids: list[str], *, unique: bool) -> None:
        old = self.first.get((jid, mode), [])
        self.first[(jid, mode)] = sorted(set(old) | set(ids) if unique else old + ids)[: self.keep]

    def flips(self) -> dict[str, np.ndarray]:
        """Per judge the file rows (sorted) of the items whose two orders gave different
        decisive verdicts: each flipped item's later row, as the whole-table way took it."""
        out = {}
        for index, jid in enumerate(self.judges):
            at = np.flatnonzero(self.judge == index)  # the judge's decisive rows, in file order
            keys, right = self.key[at], self.right[at]
            order = np.argsort(keys, kind="stable")
            keys, right = keys[order], right[order]
            flip = (keys[1:] == keys[:-1]) & (right[1:] != right[:-1])  # the item's two orders disagree
            out[jid] = np.sort(at[order[1:][flip]])
        del self.key, self.right, self.judge
        return out

    def add_flip_ids(self, flips: dict[str, np.ndarray], base: int, item_ids: pa.Array) -> None:
        for jid, rows in flips.items():
            lo, hi = np.searchsorted(rows, [base, base + len(item_ids)])
            if hi > lo:
                self._merge(jid, "order_flip", item_ids.take(pa.array(rows[lo:hi] - base)).to_pylist(),
                            unique=False)

    def picks(self) -> list[tuple[str, str, str]]:
        """(judge id, mode, item id): up to ``n`` items per judge and mode, the first by item
        id (a content hash), so the same log always shows the same examples; items shown for
        an earlier mode are passed over while others remain."""
        out = []
        for jid in sorted({jid for jid, _ in self.first}):
            used: set[str] = set()
            for mode in MODES:
                first = self.first.get((jid, mode), [])[: self.n + len(used)]
                chosen = [i for i in first if i not in used][: self.n]
                chosen += [i for i in first if i in used][: self.n - len(chosen)]
                used.update(chosen)
                out += [(jid, mode, item) for item in chosen]
        return out


def _scan(records: pq.ParquetFile, n: int) -> tuple[_Scan, list[tuple[str, str, str]]]:
    """The identities' values and the example items (``_Scan``) of the counted records
    (``compact.parquet_file``): the narrow columns one row group at a time, then the item ids
    of the order flips' rows."""
    scan = _Scan(n, records.metadata.num_rows)
    groups = range(records.metadata.num_row_groups)
    for i in groups:
        scan.add(records.read_row_group(i, columns=_NARROW, use_threads=False))
    flips = scan.flips()
    if any(len(rows) for rows in flips.values()):
        base = 0
        for i in groups:
            ids = records.read_row_group(i, columns=["item_id"], use_threads=False)["item_id"].combine_chunks()
            scan.add_flip_ids(flips, base, ids)
            base += len(ids)
    return scan, scan.picks()


def _failures(records: pq.ParquetFile, picked: list[tuple[str, str, str]]) -> list[tuple[str, list[dict]]]:
    """(mode, the item's records in both orders) for the picked items (``_Scan.picks``). Only
    the row groups that hold one are read whole, one at a time, so memory does not grow with
    the records nor with the replies' text."""
    if not picked:
        return []
    wanted = pa.array(sorted({item for _, _, item in picked}), type=pa.string())
    by_key: dict[tuple[str, str], list[dict]] = {}
    for i in range(records.metadata.num_row_groups):
        mask = pc.is_in(records.read_row_group(i, columns=["item_id"], use_threads=False)["item_id"], value_set=wanted)
        if pc.any(mask).as_py():
            for r in records.read_row_group(i, columns=_COLUMNS, use_threads=False).filter(mask).to_pylist():
                by_key.setdefault((r["judge_id"], r["item_id"]), []).append(r)
    out = [(mode, sorted(by_key[(jid, item)], key=lambda r: r["order"] != "ref_first")) for jid, mode, item in picked]
    return sorted(out, key=lambda x: (x[1][0]["judge"], x[1][0]["judge_id"], list(MODES).index(x[0])))


def _texts(info, wanted: list[dict]):
    """The wanted items (their first records), regenerated from the run's resolved manifest.
    Returns (item_id -> Item, a note when some or all are unavailable)."""
    from .. import corpus
    from ..errors import UserError
    from ..plan.lookup import lookup

    try:
        chosen = corpus.select(info.manifest)
    except (UserError, OSError, ValueError) as e:
        return {}, f"the corpus is no longer readable ({e}): texts unavailable, ids and raw replies only"
    found = lookup(info.manifest, chosen, wanted)
    missing = len({w["item_id"] for w in wanted} - set(found))
    note = (f"{missing} example item(s) could not be regenerated from the corpus (changed since the "
            "run?): their texts are unavailable") if missing else None
    return found, note


def _examples(info, records: pq.ParquetFile, picked: list[tuple[str, str, str]]) -> tuple[list[Example], str | None]:
    failures = _failures(records, picked)
    if not failures:
        return [], None
    items, note = _texts(info, [recs[0] for _, recs in failures])
    out = []
    for mode, recs in failures:
        first, item = recs[0], items.get(recs[0]["item_id"])
        out.append(Example(
            mode, first["judge"], first["judge_id"], first["item_id"], first["lang"], first["perturbation"],
            first["severity"], [Reply(r["order"], r["slot"], r["verdict"], r["raw"]) for r in recs],
            item.prompt if item else None, item.reference if item else None, item.perturbed if item else None,
            first.get("cue")))
    return out, note


_STATS_SCHEMA = pa.schema([("judge_id", pa.string()), ("judge", pa.string()), ("status", pa.string()),
                           ("attempts", pa.int64()), ("latency_ms", pa.float64()), ("tokens_in", pa.int64()),
                           ("tokens_out", pa.int64()), ("error_kind", pa.string())])
# The log's columns the report reads in its one pass over the log: the statistics' and the
# refusals' (score.diagnose.Refusals).
_LOG_PASS_SCHEMA = pa.schema(list(_STATS_SCHEMA)
                             + [f for f in diagnose.LOG_SCHEMA if f.name not in _STATS_SCHEMA.names])


class _Tally:
    """One judge's running totals over the log's blocks."""

    def __init__(self, judge: str):
        self.judge, self.records, self.ok, self.calls, self.retries = judge, 0, 0, 0, 0
        self.tokens_in = self.tokens_out = 0
        self.errors: dict[str, int] = {}
        self.latencies: list = []  # arrays of the ok records' latencies, one per block

    def add(self, block: pa.Table) -> None:
        import numpy as np

        ok = pc.equal(block["status"], "ok").to_numpy(zero_copy_only=False)
        attempts = block["attempts"].fill_null(1).to_numpy()
        lat = block["latency_ms"].to_numpy(zero_copy_only=False)[ok]
        self.latencies.append(lat[np.isfinite(lat)])
        self.records += block.num_rows
        self.ok += int(ok.sum())
        self.calls += int(attempts.sum())
        self.retries += int((attempts - 1).clip(0).sum())
        self.tokens_in += int(pc.sum(block["tokens_in"]).as_py() or 0)
        self.tokens_out += int(pc.sum(block["tokens_out"]).as_py() or 0)
        kinds = pc.value_counts(block.filter(pa.array(~ok))["error_kind"].fill_null("unknown"))
        for kind, count in zip(kinds.field("values").to_pylist(), kinds.field("counts").to_pylist(), strict=True):
            self.errors[kind] = self.errors.get(kind, 0) + count

    def stats(self, judge_id: str) -> LogStats:
        import numpy as np

        lat = np.concatenate(self.latencies) if self.latencies else np.zeros(0)
        pct = {f"p{q}": round(float(np.percentile(lat, q)), 2) if lat.size else None for q in (50, 95, 99)}
        return LogStats(self.judge, judge_id, self.records, self.ok, dict(sorted(self.errors.items())),
                        self.calls, self.retries, pct, self.tokens_in, self.tokens_out)


class LogPass:
    """Per judge, over every record of the log shown a block at a time (memory holds the
    latencies, 8 bytes a call, not the records): its statistics, and the refusals
    ``diagnose.of_run`` reports. ``add`` each block of valid records (``log.stream_segment``'s,
    ``_LOG_PASS_SCHEMA``'s columns or more): the report's own pass, or the blocks of a parse
    the caller makes anyway (the audit's compaction, ``compact.write_parquet(observe=...)``)."""

    def __init__(self) -> None:
        self._tallies: dict[str, _Tally] = {}
        self._refusals = diagnose.Refusals()

    def add(self, batch: pa.RecordBatch) -> None:
        self._refusals.add(batch)
        block = pa.Table.from_batches([batch])
        for jid in pc.unique(block["judge_id"]).to_pylist():
            mine = block.filter(pc.equal(block["judge_id"], jid))
            self._tallies.setdefault(jid, _Tally(mine["judge"][0].as_py())).add(mine)

    def result(self) -> tuple[list[LogStats], list[Diagnosis]]:
        stats = sorted((t.stats(jid) for jid, t in self._tallies.items()), key=lambda s: (s.judge, s.judge_id))
        return stats, self._refusals.diagnoses()


def _log_pass(run_dir: Path) -> tuple[list[LogStats], list[Diagnosis]]:
    """``LogPass`` over the run's log, read a few megabytes at a time."""
    from ..store import log

    tally = LogPass()
    for seg in log.segments(run_dir):
        for batch in log.stream_segment(seg, _LOG_PASS_SCHEMA):
            tally.add(batch)
    return tally.result()


def gather_run(run_dir: Path, cards: Cards | None = None, examples: int = EXAMPLES_PER_MODE,
               logged: LogPass | None = None) -> RunReport:
    """One run directory's part of the report; cards are rebuilt from the log when not given,
    and the log is read for its statistics unless ``logged`` was shown all of it."""
    from ..score.run import cards_of_run
    from ..store.rundir import RunDir

    run_dir = Path(run_dir)
    info = RunDir(run_dir).info()
    if cards is None:
        cards = cards_of_run(run_dir)
    # The counted records a row group at a time (memory does not grow with them): the
    # identities' values and the example items, then those items' records.
    records = compact.parquet_file(run_dir)
    scan, picked = _scan(records, examples)
    identities = _identities(run_dir, info, scan.seen)
    del scan
    found, note = _examples(info, records, picked)
    del records
    stats = RunDir(run_dir).stats()  # validated: a received run's stats.json is untrusted
    log_stats, refusals = logged.result() if logged is not None else _log_pass(run_dir)
    return RunReport(
        str(run_dir), info.manifest.name, info.babelrun_version, cards, identities, log_stats,
        stats.judges if stats else [], stats.elapsed_s if stats else None, found, note, _stale(run_dir),
        _analyses(run_dir), diagnose.of_run(run_dir, refusals))


def _analyses(run_dir: Path) -> dict[str, Any]:
    """The results of the analyses run on ``run_dir``, by registry name."""
    return {a.name: result for a in registry.ANALYSES
            if (result := _optional(run_dir / a.output, a.result_type)) is not None}


def plotted(run_dir: Path, cards: Cards) -> ReportData:
    """What the plots read of one run, its cards and its analyses' results, without what only
    the pages show (records, examples, log statistics, recommendations): the plots of this and
    of ``gather([run_dir], {run_dir: cards})`` are the same (tests/e2e/test_report.py), so an
    audit hands it to its painter as soon as it has scored and gathers the rest meanwhile."""
    from ..store.rundir import RunDir

    info = RunDir(run_dir).info()
    run = RunReport(str(run_dir), info.manifest.name, info.babelrun_version, cards, [], [], [], None, [], None,
                    analyses=_analyses(run_dir))
    return ReportData([run], [])


def _stale(run_dir: Path) -> list[str]:
    """The analysis files (every registry entry's) written before the log last grew: their
    numbers miss records."""
    from ..store import log

    newest = max((seg.stat().st_mtime for seg in log.segments(run_dir)), default=0.0)
    return [name for name in registry.outputs()
            if (run_dir / name).exists() and (run_dir / name).stat().st_mtime < newest]


def gather(run_dirs: Sequence[Path], cards: dict[Path, Cards] | None = None,
           thresholds: Thresholds = THRESHOLDS, logged: dict[Path, LogPass] | None = None) -> ReportData:
    cards, logged = cards or {}, logged or {}
    runs = [gather_run(Path(d), cards.get(Path(d)), logged=logged.get(Path(d))) for d in run_dirs]
    data = ReportData(runs, [], thresholds)
    from . import robustness

    return msgspec.structs.replace(data, recommendations=recommend(data.scored(), thresholds)
                                   + robustness.recommendations(data))

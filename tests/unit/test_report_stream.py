"""The report's example items and judge identities, gathered a Parquet row group at a time
(``report.data._scan``), are the ones the whole-table way chose (the narrow columns read
whole, each judge's items sorted by id): the same examples, the same served models and
fingerprints, in the same order, whatever row groups an item's two orders fall in."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from babelrun.core.keys import item_bits
from babelrun.report import data as D
from babelrun.store import compact

VERDICTS = ["reference", "perturbed", "tie", "invalid", None]


def _records(seed: int, items: int) -> pa.Table:
    """Counted records of three judges (one renamed, one whose identity values change),
    every kind that is or is not a failure to show, the two orders of an item far apart."""
    rng = np.random.default_rng(seed)
    ids = [f"{rng.integers(1 << 62):016x}{rng.integers(1 << 16):04x}"[:20] for _ in range(items)]
    rows = []
    for jid, names in (("j1", ["careful"]), ("j2", ["old-name", "biased"]), ("j3", ["third"])):
        for i, item in enumerate(ids):
            kind = rng.choice(["text", "text", "text", "probe", "tie_probe", "labelled_tie"])
            pert = (str(rng.choice(["authority", D.SELF_MATCH, "master_key"])) if kind == "probe"
                    else str(rng.choice(["truncate", "shuffle"])))
            # a verdict distribution that gives every mode, and order flips
            p = [0.55, 0.25, 0.08, 0.07, 0.05] if jid != "j3" else [0.9, 0.04, 0.02, 0.02, 0.02]
            for order in ("ref_first", "pert_first"):
                rows.append({
                    "judge_id": jid, "judge": names[min(i * len(names) // items, len(names) - 1)],
                    "kind": str(kind), "item_id": item, "item_key": item_bits(item), "order": order,
                    "verdict": VERDICTS[rng.choice(len(VERDICTS), p=p)], "perturbation": pert,
                    "served_model": [None, "", "m-1", "m-2"][int(rng.integers(4))] if jid == "j2" else "m-0",
                    "fingerprint": f"fp{int(rng.integers(3))}" if jid != "j1" else None,
                    "lang": "en", "ref_id": f"r{i}", "severity": 0.6, "slot": "A", "raw": f"reply {i}",
                    "cue": None})
    perm = rng.permutation(len(rows))  # an item's two orders land in different row groups
    table = pa.Table.from_pylist([rows[k] for k in perm])
    return table.set_column(table.schema.get_field_index("item_key"), "item_key",
                            table["item_key"].cast(pa.uint64()))


def _whole_table_pick(mine: pa.Table, mode: str, n: int, used: set[str]) -> list[str]:
    """report/data.py's choice before it streamed (its ``_in_mode`` and ``_pick``)."""
    verdict = mine["verdict"]
    if mode != "order_flip":
        ids = pc.unique(mine.filter(pc.equal(verdict, mode))["item_id"])
    else:
        decisive = pc.fill_null(pc.is_in(verdict, pa.array(["reference", "perturbed"])),
                                False).to_numpy(zero_copy_only=False)
        rows = np.flatnonzero(decisive)
        keys = mine["item_key"].to_numpy()[rows]
        right = pc.equal(verdict, "reference").to_numpy(zero_copy_only=False)[rows]
        order = np.argsort(keys, kind="stable")
        keys, right = keys[order], right[order]
        flip = (keys[1:] == keys[:-1]) & (right[1:] != right[:-1])
        ids = mine["item_id"].take(pa.array(rows[order[1:][flip]]))
    first = ids.take(pc.sort_indices(ids)[: n + len(used)]).to_pylist()
    chosen = [i for i in first if i not in used][:n]
    chosen += [i for i in first if i in used][: n - len(chosen)]
    used.update(chosen)
    return chosen


def _whole_table(records: pa.Table, n: int):
    kind, verdict = records["kind"].cast(pa.string()), records["verdict"].cast(pa.string())
    gold = pc.invert(pc.is_in(kind, pa.array(["tie_probe"])))
    gold = pc.and_(gold, pc.invert(pc.and_(pc.equal(kind, "labelled_tie"), pc.equal(verdict, "tie"))))
    gold = pc.and_(gold, pc.invert(pc.and_(pc.equal(records["perturbation"], D.SELF_MATCH),
                                           pc.equal(records["verdict"], "tie"))))
    narrow = pa.table({"item_id": records["item_id"], "item_key": records["item_key"], "verdict": verdict})
    picked = []
    for jid in sorted(pc.unique(records["judge_id"].filter(gold)).cast(pa.string()).to_pylist()):
        mine = narrow.filter(pc.and_(gold, pc.equal(records["judge_id"], jid)))
        used: set[str] = set()
        picked += [(jid, mode, item) for mode in D.MODES for item in _whole_table_pick(mine, mode, n, used)]
    seen = {}
    for jid in D._plain(pc.unique(records["judge_id"])):
        mask = pc.equal(records["judge_id"], jid)
        seen[jid] = {c: [v for v in D._plain(pc.unique(records[c].filter(mask))) if v] for c in D._IDENTITY}
    return picked, seen


def _file(path, records: pa.Table) -> pq.ParquetFile:
    """As ``compact.parquet_file`` opens a run's: the dictionary columns read as dictionaries."""
    return pq.ParquetFile(path, read_dictionary=[c for c in compact.DICTIONARY_COLUMNS if c in records.column_names])


@pytest.mark.parametrize(("seed", "items", "n", "group"), [(0, 400, 3, 37), (1, 400, 1, 5), (2, 120, 2, 1000),
                                                           (3, 60, 3, 3)])
def test_streamed_choice_is_the_whole_table_choice(tmp_path, seed, items, n, group):
    records = _records(seed, items)
    pq.write_table(records, tmp_path / "r.parquet", row_group_size=group)
    f = _file(tmp_path / "r.parquet", records)
    whole = pq.read_table(tmp_path / "r.parquet", columns=D._NARROW,
                          read_dictionary=[c for c in compact.DICTIONARY_COLUMNS if c in D._NARROW])
    expected, seen = _whole_table(whole, n)
    scan, picked = D._scan(f, n)
    assert picked == expected
    assert {m for _, m, _ in picked} == set(D.MODES)  # every mode shown, order flips included
    assert {jid: {c: list(v) for c, v in cols.items()} for jid, cols in scan.seen.items()} == seen
    # a renamed judge's names in the order the file first shows them (its last is the one shown)
    names = whole.filter(pc.equal(whole["judge_id"], "j2"))["judge"].cast(pa.string()).to_pylist()
    assert seen["j2"]["judge"] == list(dict.fromkeys(names)) and len(seen["j2"]["judge"]) == 2
    # the picked items' records: every judge's rows of those items, in file order
    wanted = sorted({item for _, _, item in picked})
    rows = pq.read_table(tmp_path / "r.parquet", columns=D._COLUMNS, filters=[("item_id", "in", wanted)]).to_pylist()
    failures = D._failures(f, picked)
    by_key: dict = {}
    for r in rows:
        by_key.setdefault((r["judge_id"], r["item_id"]), []).append(r)
    whole_way = [(mode, sorted(by_key[(jid, item)], key=lambda r: r["order"] != "ref_first"))
                 for jid, mode, item in picked]
    assert sorted(map(repr, failures)) == sorted(map(repr, whole_way))


def test_no_gold_rows_no_examples(tmp_path):
    records = _records(4, 30)
    records = records.set_column(records.schema.get_field_index("kind"), "kind",
                                 pa.array(["tie_probe"] * records.num_rows))
    pq.write_table(records, tmp_path / "r.parquet", row_group_size=11)
    f = _file(tmp_path / "r.parquet", records)
    scan, picked = D._scan(f, 3)
    assert picked == [] and D._failures(f, picked) == []
    assert set(scan.seen) == {"j1", "j2", "j3"}  # identities still come from every record

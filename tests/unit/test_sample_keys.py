"""Sample indices in keys: sample 0 packs exactly as a key always did; later samples live under
their own done-set slot, in the shards, the log index, the compaction, the cache key and batches."""

import numpy as np
import pyarrow as pa

from babelrun.core.keys import Shard, item_bits, judge_of_slot, keys_by_judge, sample_seed, slot
from babelrun.core.records import Record
from babelrun.engine.batches import custom_id
from babelrun.store.compact import counted
from babelrun.store.done import DoneSet

JID = "0123456789ab"
ITEMS = [f"{i * 7919:015x}00000" for i in range(600)]  # ids differ in their first 15 digits


def _record(item_id, order, sample=0, verdict="reference"):
    return Record(judge_id=JID, item_id=item_id, order=order, status="ok", judge="j", kind="text", lang="en",
                  perturbation="truncate", severity=0.6, ref_len=10, pert_len=5, verdict=verdict, slot="A",
                  sample=sample)


def test_sample_zero_keys_as_before_and_later_samples_by_slot():
    assert slot(JID, 0) == JID and slot(JID, 2) == f"{JID}~2" and judge_of_slot(f"{JID}~2") == (JID, 2)
    assert _record(ITEMS[0], "ref_first").key == (JID, ITEMS[0], "ref_first")  # the old 3-tuple
    assert _record(ITEMS[0], "ref_first", 2).key == (JID, ITEMS[0], "ref_first", 2)
    done = DoneSet.of([(JID, ITEMS[0], "pert_first"), (JID, ITEMS[1], "ref_first", 1)])
    assert done.contains(JID, ITEMS[0], "pert_first") and not done.contains(JID, ITEMS[0], "pert_first", 1)
    assert done.contains(JID, ITEMS[1], "ref_first", 1) and not done.contains(JID, ITEMS[1], "ref_first")
    assert int(done.keys(JID)[0]) == (item_bits(ITEMS[0]) << 1) | 1  # 61 bits, as before
    assert done.count(JID, ITEMS[:2], samples=1) == 1 and done.count(JID, ITEMS[:2], samples=2) == 2


def test_log_columns_group_by_slot_and_old_rows_read_sample_zero():
    table = pa.table({"judge_id": [JID] * 4, "item_id": [ITEMS[0]] * 4,
                      "order": ["ref_first", "ref_first", "pert_first", "ref_first"], "sample": [None, 1, 0, 2]})
    groups = {name: bits.tolist() for name, _, bits in keys_by_judge(table)}
    first = item_bits(ITEMS[0]) << 1
    assert groups == {JID: [first, first | 1], f"{JID}~1": [first], f"{JID}~2": [first]}
    without = table.drop_columns(["sample"])
    assert {name for name, _, _ in keys_by_judge(without)} == {JID}


def test_compaction_keeps_one_row_per_sample_with_a_sample_column():
    from babelrun.store.compact import table as as_table

    records = [_record(ITEMS[0], "ref_first", s) for s in (0, 1, 2, 1)]  # sample 1 twice: one kept
    out = counted(as_table(records))
    assert sorted(out["sample"].to_pylist()) == [0, 1, 2]
    assert len(set(out["item_key"].to_pylist())) == 1


def test_shards_split_every_sample_exactly_once():
    shards = [Shard(i, 3) for i in range(3)]
    for sample in range(3):
        owners = [[s.contains(JID, iid, o, sample) for s in shards]
                  for iid in ITEMS for o in ("ref_first", "pert_first")]
        assert all(sum(row) == 1 for row in owners)
        keys = np.array([(item_bits(i) << 1) | b for i in ITEMS for b in (0, 1)], dtype=np.uint64)
        masks = [s.mask(slot(JID, sample), keys) for s in shards]
        assert (sum(m.astype(int) for m in masks) == 1).all()
        assert [list(m) for m in masks] == [[row[k] for row in owners] for k in range(3)]
    # sample 0's shard is the key's shard as it always was; other samples spread independently
    spread = [sum(shards[0].contains(JID, i, "ref_first", s) for i in ITEMS) for s in range(3)]
    assert all(abs(n - len(ITEMS) / 3) < len(ITEMS) * 0.1 for n in spread)


def test_batch_ids_and_seeds_tell_samples_apart():
    assert custom_id(ITEMS[0], "pert_first") == f"{ITEMS[0]}-p"
    assert custom_id(ITEMS[0], "pert_first", 2) == f"{ITEMS[0]}-p-s2"
    seeds = {sample_seed(7, ITEMS[0], "ref_first", s) for s in range(20)}
    assert len(seeds) == 20 and all(0 <= s < 2**31 for s in seeds)
    assert sample_seed(7, ITEMS[0], "ref_first", 3) == sample_seed(7, ITEMS[0], "ref_first", 3)


def test_the_cache_key_of_a_later_sample_is_its_own():
    import babelrun
    from babelrun.engine.records import cache_key
    from babelrun.judges import build
    from babelrun.spec import JudgeSpec

    judge = build(JudgeSpec(name="s", backend="simulated", temperature=0.7, samples=3), 0)
    item = next(iter(babelrun.plan.Plan.from_manifest(babelrun.Manifest(name="t", judges=[judge.spec])).items()))
    keys = [cache_key(judge, judge.protocol.request(item, "ref_first", s)) for s in range(3)]
    assert len(set(keys)) == 3
    from babelrun.judges.base import JudgeRequest
    plain = judge.protocol.request(item, "ref_first")
    assert cache_key(judge, JudgeRequest(plain.item, plain.order, plain.messages)) == keys[0]  # as before samples

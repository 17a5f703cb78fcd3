"""Shards without a process: every key in exactly one shard, the locks that let shards share a run
directory, repair of a shard's own segments, a shard's share of the rate budget, and one-line
refusals of bad shard arguments. (Sharded audits in separate processes are e2e/test_shards.py.)"""


import numpy as np
import pytest

import babelrun
from babelrun.app import audit as run
from babelrun.app import cli
from babelrun.core.keys import plan_keys
from babelrun.errors import UserError
from babelrun.judges import judge_id
from babelrun.plan import Plan
from babelrun.store import log
from helpers import simulated, write_manifest


def test_shards_partition_every_judges_keys(tmp_path, small_corpus):
    path = write_manifest(tmp_path, [simulated("a"), simulated("b", position_bias=0.1)], corpus=small_corpus)
    m = babelrun.load_manifest(path)
    plan = Plan.from_manifest(m)
    keys = plan_keys(plan.item_ids)
    for jid in map(judge_id, m.judges):
        masks = [log.Shard(i, 4).mask(jid, keys) for i in range(4)]
        assert (np.sum(masks, axis=0) == 1).all()  # every key in exactly one shard
        assert [plan.sharded(log.Shard(i, 4)).calls_for(jid) for i in range(4)] == [int(x.sum()) for x in masks]
        # The scalar test the engine uses agrees with the vectorised one.
        orders = ["ref_first"] * len(plan.item_ids) + ["pert_first"] * len(plan.item_ids)
        scalar = [log.Shard(2, 4).contains(jid, i, o) for i, o in zip(list(plan.item_ids) * 2, orders, strict=True)]
        assert scalar == masks[2].tolist()
    # The two judges' keys split differently (the judge id is in the hash).
    a, b = (log.Shard(0, 4).mask(judge_id(j), keys) for j in m.judges)
    assert (a != b).any()


def test_shards_split_fixed_keys_evenly():
    # Fixed keys and judge id, so this is a fact about the hash, not a draw: 3 shards of
    # 6,000 keys each within 5 % of a third.
    ids = [f"item-{i:05d}" for i in range(3000)]
    keys = plan_keys(ids)
    sizes = [int(log.Shard(i, 3).mask("openai:m1@http://127.0.0.1:8000", keys).sum()) for i in range(3)]
    assert sum(sizes) == 6000 and all(abs(n - 2000) < 100 for n in sizes), sizes


def test_locks_let_shards_share_a_run_dir_and_nothing_else(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    s0, s1 = log.Shard(0, 2), log.Shard(1, 2)
    with log.RunLock(run_dir, s0), log.RunLock(run_dir, s1), log.RunLock(run_dir, shared=True):
        with pytest.raises(UserError, match="shard 0/2 of .* is already running in babelrun pid"):
            log.RunLock(run_dir, s0).__enter__()
        with pytest.raises(UserError, match="is in use by babelrun shards"):
            log.RunLock(run_dir).__enter__()
    with log.RunLock(run_dir):  # all gone: a whole-run audit or merge may go
        with pytest.raises(UserError, match="a whole-run audit or merge"):
            log.RunLock(run_dir, s1).__enter__()


def test_a_shard_repairs_only_its_own_segments(tmp_path):
    folder = tmp_path / "log"
    folder.mkdir()
    torn = b'{"judge_id":"j","item_id":"a","order":"ref_first"}\n{"judge_id":"j","it'
    mine, other, whole = (folder / "s0of2-h-1-x-0001.jsonl", folder / "s1of2-h-2-x-0001.jsonl",
                          folder / "h-3-x-0001.jsonl")
    for seg in (mine, other, whole):
        seg.write_bytes(torn)
    assert log.repair(tmp_path, log.Shard(0, 2)) == len(torn) - torn.index(b"\n") - 1
    assert mine.read_bytes().endswith(b"}\n")
    assert other.read_bytes() == torn and whole.read_bytes() == torn  # a live writer's, maybe
    assert log.repair(tmp_path) == 2 * (len(torn) - torn.index(b"\n") - 1)  # the whole run: all


def test_a_shard_paces_at_its_share_of_the_account(tmp_path):
    spec = babelrun.load_manifest(write_manifest(tmp_path, [{**simulated(), "rate_limit": {"rpm": 600, "tpm": 9000}}]))
    (account,) = run.limits.accounts(spec.judges, 1 / 3).values()
    assert (account.rpm, account.tpm) == (200, 3000)


@pytest.mark.parametrize(("args", "message"), [
    (["--shard", "3/3"], "--shard '3/3': need 0 <= i < N"),
    (["--shard", "one/3"], "--shard 'one/3': expected i/N, e.g. 0/4"),
    (["--shard", "0/2", "--executor", "ray"],
     "--shard runs one shard here; the Ray executor runs them all: use one or the other"),
    (["--workers", "0", "--executor", "ray"], "--workers must be at least 1"),
])
def test_bad_shard_arguments_are_one_line_and_write_nothing(tmp_path, small_corpus, capsys, args, message):
    path = write_manifest(tmp_path, [simulated()], corpus=small_corpus)
    assert cli.main(["audit", str(path), *args]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"babelrun: error: {message}"]
    assert not (tmp_path / "run").exists()

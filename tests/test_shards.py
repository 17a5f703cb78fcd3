"""Sharded audits: one plan as shards in separate processes, merged, equals one process."""

import shutil
import subprocess
import sys
from collections import Counter

import msgspec
import numpy as np
import pytest

import babelrun
from babelrun.app import audit as run
from babelrun.app import cli
from babelrun.errors import UserError
from babelrun.judges import judge_id
from babelrun.plan import Plan
from babelrun.store import log
from babelrun.testing import FakeJudgeServer
from helpers import ROOT, simulated, write_manifest

CORPUS = {"sources": [{"kind": "bundled"}], "languages": ["ar", "hi", "ja"], "references_per_language": 3}
PERTURBATIONS = [{"name": n, "severities": [0.6]} for n in ("truncate", "shuffle", "repeat_pad")]


def _manifest(folder, server, concurrency=1):
    folder.mkdir(parents=True, exist_ok=True)
    judges = [{"name": n, "backend": "openai", "model": m, "endpoint": server.url, "concurrency": concurrency}
              for n, m in (("one", "m1"), ("two", "m2"))]
    return write_manifest(folder, judges, corpus=CORPUS, perturbations=PERTURBATIONS)


def _cmd(*args):
    return [sys.executable, "-m", "babelrun", *map(str, args)]


def _planned(path):
    m = babelrun.load_manifest(path)
    ids = Plan.from_manifest(m).item_ids
    return {(judge_id(j), i, o) for j in m.judges for i in ids for o in ("ref_first", "pert_first")}


def _key(line):
    r = msgspec.json.decode(line, type=log.Record)
    return r.key


def _verdicts(run_dir):
    ok = Counter(r.key for r in log.read(run_dir) if r.status == "ok")
    return ok, {r.key: r.verdict for r in log.final_records(log.read(run_dir))}


def test_three_shard_processes_merge_to_the_one_process_run(tmp_path):
    # One call in flight per judge and shard: the server holds the first verdicts until five
    # calls are in flight at once, which two shards (two judges each) cannot make alone. So
    # the three ran at the same time on one run directory, shown by a count, not a clock.
    with FakeJudgeServer(gather=5) as server:
        path = _manifest(tmp_path / "sharded", server)
        shards = [subprocess.Popen(_cmd("audit", path, "--shard", f"{i}/3", "--progress-every", "60"), cwd=ROOT,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(3)]
        outs = [p.communicate(timeout=120) for p in shards]
        assert [p.returncode for p in shards] == [0, 0, 0], [err for _, err in outs]
        assert server.gathered and server.most_in_flight >= 5
        whole = _manifest(tmp_path / "whole", server, concurrency=8)  # not in the judge_id
        one = subprocess.run(_cmd("audit", whole, "--progress-every", "60"), cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
        assert one.returncode == 0, one.stderr
    run_dir = tmp_path / "sharded" / "run"
    assert "babelrun merge" in outs[0][0] and not (run_dir / "cards.json").exists()  # shards do not score
    segments = log.segments(run_dir)
    assert sorted(s.name[:5] for s in segments) == ["s0of3", "s1of3", "s2of3"]
    # Each shard judged exactly its keys: disjoint, and together the plan.
    planned = _planned(path)
    by_shard = [{_key(line) for line in s.read_bytes().splitlines()} for s in segments]
    assert sum(map(len, by_shard)) == len(planned) and set().union(*by_shard) == planned
    assert min(map(len, by_shard)) > len(planned) / 3 * 0.7

    merged = subprocess.run(_cmd("merge", run_dir), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert merged.returncode == 0, merged.stderr
    assert f"{len(planned)} of {len(planned)} planned keys counted once each (0 repeated" in merged.stdout
    ok, verdicts = _verdicts(run_dir)
    assert set(ok) == planned and max(ok.values()) == 1
    assert verdicts == _verdicts(tmp_path / "whole" / "run")[1]
    cards = (tmp_path / "whole" / "run" / "cards.json").read_bytes()
    assert (run_dir / "cards.json").read_bytes() == cards

    # A key written twice (two shards of different N overlapping, or a repeated segment copied
    # from another host) counts once: merging again changes nothing but the repeat count.
    shutil.copy(segments[0], run_dir / "log" / f"s1of2-otherhost-1-{segments[0].name[6:]}")
    again = subprocess.run(_cmd("merge", run_dir), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert (f"{len(planned)} of {len(planned)} planned keys counted once each ({len(by_shard[0])} repeated"
            in again.stdout)
    assert (run_dir / "cards.json").read_bytes() == cards
    assert babelrun.load_run(run_dir).num_rows == len(planned)


def test_shards_partition_every_judges_keys(tmp_path, small_corpus):
    path = write_manifest(tmp_path, [simulated("a"), simulated("b", position_bias=0.1)], corpus=small_corpus)
    m = babelrun.load_manifest(path)
    plan = Plan.from_manifest(m)
    keys = log.plan_keys(plan.item_ids)
    for jid in map(judge_id, m.judges):
        masks = [log.Shard(i, 4).mask(jid, keys) for i in range(4)]
        assert (np.sum(masks, axis=0) == 1).all()  # every key in exactly one shard
        assert [plan.sharded(log.Shard(i, 4)).calls_for(jid) for i in range(4)] == [int(x.sum()) for x in masks]
        # The scalar test the engine uses agrees with the vectorised one.
        orders = ["ref_first"] * len(plan.item_ids) + ["pert_first"] * len(plan.item_ids)
        scalar = [log.Shard(2, 4).contains(jid, i, o) for i, o in zip(plan.item_ids * 2, orders, strict=True)]
        assert scalar == masks[2].tolist()
    # The two judges' keys split differently (the judge id is in the hash).
    a, b = (log.Shard(0, 4).mask(judge_id(j), keys) for j in m.judges)
    assert (a != b).any()


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


def test_ray_executor_without_ray_says_how_to_install_it(tmp_path, small_corpus, monkeypatch, capsys):
    path = write_manifest(tmp_path, [simulated()], corpus=small_corpus, executor="ray")
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    assert cli.main(["audit", str(path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["babelrun: error: executor: ray needs Ray, which is not installed: pip install 'babelrun[ray]'"]
    assert cli.main(["audit", str(path), "--executor", "local", "--progress-every", "60"]) == 0


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

"""Sharded audits: one plan as shards in separate processes, merged, equals one process."""

import shutil
import subprocess
import sys
from collections import Counter

import msgspec

import babelrun
from babelrun.app import cli
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
    # Every shard had work (the split's balance is a property of the hash, held by
    # tests/unit/test_shard_keys.py on fixed keys: here the judge id holds a random port).
    assert min(map(len, by_shard)) > 0

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


def test_ray_executor_without_ray_says_how_to_install_it(tmp_path, small_corpus, monkeypatch, capsys):
    path = write_manifest(tmp_path, [simulated()], corpus=small_corpus, executor="ray")
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    assert cli.main(["audit", str(path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["babelrun: error: executor: ray needs Ray, which is not installed: pip install 'babelrun[ray]'"]
    assert cli.main(["audit", str(path), "--executor", "local", "--progress-every", "60"]) == 0

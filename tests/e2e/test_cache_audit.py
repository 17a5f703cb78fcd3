"""The response cache (``cache: {dir}``): shared across run directories, keyed by
the judge id and the exact request. Calls are counted at the loopback server."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import msgspec
import pytest

import babelrun
from babelrun.plan import Plan
from babelrun.store import cache, log
from babelrun.testing import FakeJudgeServer
from helpers import ROOT, quiet_audit, write_manifest


def _corpus(*langs: str) -> dict:
    return {"sources": [{"kind": "bundled"}], "languages": list(langs), "references_per_language": 3}


def _manifest(folder, server, langs, cache_dir, **judge):
    folder.mkdir(parents=True, exist_ok=True)
    spec = {"name": "j", "backend": "openai", "model": "m", "endpoint": server.url, "concurrency": 4, **judge}
    return write_manifest(folder, [spec], corpus=_corpus(*langs), **({"cache": cache_dir} if cache_dir else {}))


def _keys(path) -> set[tuple[str, str, str]]:
    m = babelrun.load_manifest(path)
    jid = babelrun.judges.judge_id(m.judges[0])
    return {(jid, iid, o) for iid in Plan.from_manifest(m).item_ids for o in ("ref_first", "pert_first")}


def _audit(path, server) -> tuple[int, list]:
    before = server.requests
    result = quiet_audit(path)
    assert result.exit_code == 0
    return server.requests - before, list(log.read(path.parent / "run"))


def test_an_overlapping_plan_makes_no_calls_for_the_overlap(tmp_path):
    store = {"dir": str(tmp_path / "cache")}
    with FakeJudgeServer() as server:
        first = _manifest(tmp_path / "a", server, ["en", "hi", "zh"], store)
        second = _manifest(tmp_path / "b", server, ["en", "hi", "ar"], store)
        plain = _manifest(tmp_path / "c", server, ["en", "hi", "ar"], None)
        calls_a, records_a = _audit(first, server)
        calls_b, records_b = _audit(second, server)
        calls_c, records_c = _audit(plain, server)
    keys_a, keys_b = _keys(first), _keys(second)
    overlap = keys_a & keys_b
    assert len(overlap) > 50 and keys_b - keys_a  # the plans overlap, and only in part
    assert calls_a == len(keys_a)
    assert calls_b == len(keys_b - keys_a)  # none for the overlap
    assert {r.key for r in records_b if r.cached} == overlap
    assert all(r.latency_ms is None for r in records_b if r.cached)
    assert not any(r.cached for r in records_a)
    # a hit is the reply the first run got: the same verdicts as an uncached run of the plan
    assert calls_c == len(keys_b)
    assert {r.key: (r.verdict, r.raw, r.tokens_in) for r in records_b} == \
           {r.key: (r.verdict, r.raw, r.tokens_in) for r in records_c}
    stats = msgspec.json.decode((tmp_path / "b" / "run" / "stats.json").read_bytes())
    assert stats["judges"][0]["cached"] == len(overlap)
    assert (tmp_path / "b" / "run" / "cards.json").read_bytes() == (tmp_path / "c" / "run" / "cards.json").read_bytes()


@pytest.mark.parametrize("change", [{"model": "m2"}, {"prompt": "pairwise_length_neutral"}, {"max_tokens": 9}])
def test_a_changed_template_model_or_sampling_makes_every_call(tmp_path, change):
    store = {"dir": str(tmp_path / "cache")}
    with FakeJudgeServer() as server:
        calls_a, _ = _audit(_manifest(tmp_path / "a", server, ["en", "hi"], store), server)
        again, records = _audit(_manifest(tmp_path / "b", server, ["en", "hi"], store, **change), server)
    assert again == calls_a and not any(r.cached for r in records)
    # two judge ids, two folders: never shared
    assert len(cache.stats(tmp_path / "cache")["judges"]) == 2


def test_temperature_above_zero_is_cached_only_when_asked(tmp_path):
    with FakeJudgeServer() as server:
        store = {"dir": str(tmp_path / "cache")}
        calls, _ = _audit(_manifest(tmp_path / "a", server, ["en"], store, temperature=0.7), server)
        again, records = _audit(_manifest(tmp_path / "b", server, ["en"], store, temperature=0.7), server)
        assert again == calls and not any(r.cached for r in records)
        assert cache.stats(tmp_path / "cache")["entries"] == 0  # nor written
        sampled = {"dir": str(tmp_path / "cache"), "sampled": True}
        _audit(_manifest(tmp_path / "c", server, ["en"], sampled, temperature=0.7), server)
        last, records = _audit(_manifest(tmp_path / "d", server, ["en"], sampled, temperature=0.7), server)
    assert last == 0 and all(r.cached for r in records) and len(records) == calls


def test_two_concurrent_runs_on_one_cache_lose_nothing_and_corrupt_nothing(tmp_path):
    store = {"dir": str(tmp_path / "cache")}
    # gather: the first verdicts wait until 12 calls are in flight at once, more than one
    # process sends (concurrency 8): proof that the two ran together
    with FakeJudgeServer(latency_s=0.01, gather=12) as server:
        paths = [_manifest(tmp_path / "a", server, ["en", "hi", "zh"], store, concurrency=8),
                 _manifest(tmp_path / "b", server, ["en", "hi", "ar"], store, concurrency=8)]
        procs = [subprocess.Popen([sys.executable, "-m", "babelrun", "audit", str(p), "--progress-every", "60"],
                                  cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for p in paths]
        for proc in procs:
            _, err = proc.communicate(timeout=180)
            assert proc.returncode == 0, err.decode()
        concurrent = server.requests
        assert server.gathered
        union = _keys(paths[0]) | _keys(paths[1])
        # at most the overlap is asked twice (both asked it before either wrote it), never more
        assert len(union) <= concurrent <= len(_keys(paths[0])) + len(_keys(paths[1]))
        for p in paths:  # each run is whole: every planned key once, ok
            records = list(log.read(p.parent / "run"))
            ok = Counter(r.key for r in records if r.status == "ok")
            assert set(ok) == _keys(p) and max(ok.values()) == 1
        # every entry decodes; none torn, no temporary file left; one entry per distinct request
        entries = cache.entries(tmp_path / "cache")
        for path, _size, _mtime, _jid in entries:
            msgspec.json.decode(path.read_bytes(), type=cache.Entry)
        assert not list((tmp_path / "cache").rglob(".tmp-*"))
        assert len(entries) == len(union)
        # nothing lost: the union, asked again in a new run directory, makes no call
        both = _manifest(tmp_path / "u", server, ["en", "hi", "zh", "ar"], store)
        calls, records = _audit(both, server)
    assert calls == 0 and len(records) == len(union) and all(r.cached for r in records)


def test_the_cache_is_pruned_to_max_mb_after_a_run(tmp_path):
    limit = 0.02  # ~20 KB: fewer entries than the plan writes
    store = {"dir": str(tmp_path / "cache"), "max_mb": limit}
    with FakeJudgeServer() as server:
        calls, _ = _audit(_manifest(tmp_path / "a", server, ["en", "hi", "zh"], store), server)
    s = cache.stats(tmp_path / "cache")
    assert 0 < s["entries"] < calls and s["bytes"] <= limit * (1 << 20)

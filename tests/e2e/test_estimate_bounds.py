"""validate's estimate with stopping and the cache: stopping makes it an upper bound (with a floor), and the
response cache's hits it can already see are left out of the calls and the cost."""

from __future__ import annotations

from collections import Counter

import babelrun
from babelrun.app.cli import main
from babelrun.app.estimate import estimate
from babelrun.plan import Plan
from babelrun.store import log
from babelrun.testing import FakeJudgeServer
from helpers import quiet_audit, simulated, write_manifest

PRICE = {"input_per_mtok": 2.0, "output_per_mtok": 8.0}


def test_stopping_makes_the_estimate_a_bound_the_run_keeps(tmp_path, capsys):
    corpus = {"sources": [{"kind": "bundled"}], "languages": ["en", "fr", "hi"], "references_per_language": 6}
    # a judge far below the threshold: its cells stop early
    path = write_manifest(tmp_path, [{**simulated("bad", default_accuracy=0.05), "price": PRICE}],
                          corpus=corpus, stopping={"on": "verdict", "min_items": 4, "confidence": 0.8})
    m = babelrun.load_manifest(path)
    plan = Plan.from_manifest(m)
    (e,) = estimate(m, plan)
    per_cell = Counter(i.lang for i in plan.items() if i.kind == "text")
    outside = plan.n_items - sum(per_cell.values())
    assert e.upper_bound and e.calls == plan.calls_per_judge
    assert e.calls_at_least == 2 * (outside + sum(min(4, n) for n in per_cell.values())) < e.calls
    assert main(["validate", str(path)]) == 0
    assert f"bad: at most {e.calls} calls (stopping: at least {e.calls_at_least})" in capsys.readouterr().out
    result = quiet_audit(path)
    made = result.stats.judges[0].calls
    assert e.calls_at_least <= made < e.calls  # it stopped, inside the bound
    # without stopping: exact, no floor
    plain = write_manifest(tmp_path, [{**simulated("bad", default_accuracy=0.05), "price": PRICE}], corpus=corpus)
    (full,) = estimate(babelrun.load_manifest(plain), plan)
    assert not full.upper_bound and full.calls_at_least is None and full.calls == e.calls and full.cost == e.cost


def test_the_estimate_leaves_out_the_requests_the_cache_holds(tmp_path):
    store = {"dir": str(tmp_path / "cache")}
    with FakeJudgeServer() as server:
        judge = {"name": "j", "backend": "openai", "model": "m", "endpoint": server.url, "price": PRICE}
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        first = write_manifest(tmp_path / "a", [judge], cache=store, corpus={
            "sources": [{"kind": "bundled"}], "languages": ["en", "hi"], "references_per_language": 3})
        second = write_manifest(tmp_path / "b", [judge, {**judge, "name": "k", "model": "m2"}], cache=store, corpus={
            "sources": [{"kind": "bundled"}], "languages": ["en", "hi", "ar"], "references_per_language": 3})
        m = babelrun.load_manifest(second)
        before = estimate(m, Plan.from_manifest(m))
        assert quiet_audit(first).exit_code == 0
        after = estimate(m, Plan.from_manifest(m))
        requests = server.requests
        assert quiet_audit(second).exit_code == 0
        made = server.requests - requests
    records = list(log.read(tmp_path / "b" / "run"))
    hits = sum(r.cached for r in records if r.judge == "j")
    assert before[0].cached == 0 and after[0].cached == hits > 0
    assert after[0].calls == before[0].calls - hits
    assert after[0].cost < before[0].cost and after[0].tokens_in < before[0].tokens_in
    assert after[1] == before[1]  # another model: another judge id, no hits
    assert made == after[0].calls + after[1].calls  # the estimate's calls are the calls made

"""The cost ledger (issue 29): spend from the loopback server's reported usage and the
manifest's prices, per judge, language and call kind; ``audit --budget``."""

from __future__ import annotations

from collections import Counter

import msgspec
import pytest

from babelrun.app.cli import main
from babelrun.store import log
from babelrun.testing import FakeJudgeServer
from helpers import quiet_audit, write_manifest

CORPUS = {"sources": [{"kind": "bundled"}], "languages": ["en", "hi", "zh"], "references_per_language": 3}
PRICE = {"input_per_mtok": 3.0, "cached_input_per_mtok": 0.3, "output_per_mtok": 15.0}
KEY_ENV = "BABELRUN_LEDGER_KEY"


def _usd(r, price) -> float:
    """One record's cost, from its tokens: computed here, apart from engine/ledger.py."""
    cached = r.tokens_cached or 0
    cached_rate = price.get("cached_input_per_mtok", price["input_per_mtok"])
    return ((r.tokens_in - cached) * price["input_per_mtok"] + cached * cached_rate
            + r.tokens_out * price.get("output_per_mtok", 0.0)) / 1e6


def _stats(run_dir) -> dict:
    return msgspec.json.decode((run_dir / "stats.json").read_bytes())


@pytest.mark.parametrize("proto", ["openai", "anthropic", "gemini"])
def test_spend_equals_an_independent_sum_over_the_log(proto, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "k")
    with FakeJudgeServer(cached_share=0.5, faults=[500, 503, 500], retry_after=0.01) as server:
        judge = {"name": "j", "backend": proto, "model": "m", "endpoint": server.endpoint(proto),
                 "api_key_env": KEY_ENV, "concurrency": 4, "price": PRICE, "prompt_cache": proto == "anthropic"}
        path = write_manifest(tmp_path, [judge], corpus=CORPUS)
        result = quiet_audit(path)
        last_body = server.last_body
    assert result.exit_code == 0
    records = log.final_records(log.read(tmp_path / "run"))
    assert all(r.tokens_cached and 0 < r.tokens_cached < r.tokens_in for r in records)  # read from the usage
    spend = _stats(tmp_path / "run")["judges"][0]["spend"]
    assert spend["total"] == pytest.approx(sum(_usd(r, PRICE) for r in records), abs=1e-6)
    by_lang: dict[str, float] = {}
    for r in records:
        by_lang[r.lang] = by_lang.get(r.lang, 0.0) + _usd(r, PRICE)
    assert {lang: sum(row.values()) for lang, row in spend["by_language"].items()} == \
           pytest.approx(by_lang, abs=1e-5)
    retried = [r for r in records if r.attempts > 1]
    assert retried and spend["calls_by_kind"] == {"fresh": len(records) - len(retried), "retried": len(retried)}
    assert spend["by_kind"]["retried"] == pytest.approx(sum(_usd(r, PRICE) for r in retried), abs=1e-6)
    if proto == "anthropic":  # the opt-in: the static system prefix marked for the provider's cache
        assert last_body["system"][0]["cache_control"] == {"type": "ephemeral"}


def test_cached_records_cost_nothing_and_spend_adds_up_over_processes(tmp_path):
    with FakeJudgeServer() as server:
        judge = {"name": "j", "backend": "openai", "model": "m", "endpoint": server.url, "price": PRICE}
        first = write_manifest(tmp_path, [judge], corpus=CORPUS, cache={"dir": str(tmp_path / "cache")})
        assert main(["audit", str(first), "--limit", "20"]) == 0
        assert main(["audit", str(first)]) == 0
        (tmp_path / "b").mkdir()
        second = write_manifest(tmp_path / "b", [judge], corpus=CORPUS, cache={"dir": str(tmp_path / "cache")})
        assert quiet_audit(second).exit_code == 0
    records = log.final_records(log.read(tmp_path / "run"))
    total = _stats(tmp_path / "run")["judges"][0]["spend"]  # two processes' spend, summed
    assert total["total"] == pytest.approx(sum(_usd(r, PRICE) for r in records), abs=2e-6)
    assert total["calls_by_kind"] == {"fresh": len(records)}
    again = _stats(tmp_path / "b" / "run")["judges"][0]["spend"]
    assert again["total"] == 0.0 and again["calls_by_kind"] == {"cached": len(records)}


def test_budget_stops_within_one_call_of_it_per_judge_and_a_rerun_continues(tmp_path, capsys):
    budget = 0.05
    with FakeJudgeServer(latency_s=0.005) as server:
        judges = [{"name": "cheap", "backend": "openai", "model": "m1", "endpoint": server.url, "concurrency": 4,
                   "price": {"input_per_mtok": 3.0, "output_per_mtok": 15.0}},
                  {"name": "dear", "backend": "openai", "model": "m2", "endpoint": server.url, "concurrency": 4,
                   "price": {"input_per_mtok": 9.0, "output_per_mtok": 15.0}}]
        path = write_manifest(tmp_path, judges, corpus=CORPUS)
        code = main(["audit", str(path), "--budget", str(budget)])
        out = capsys.readouterr()
        first = list(log.read(tmp_path / "run"))
        planned = {r.judge: 0 for r in first}
        prices = {j["name"]: j["price"] for j in judges}
        for name in ("cheap", "dear"):
            mine = [r for r in first if r.judge == name]
            spent = sum(_usd(r, prices[name]) for r in mine)
            one = max(_usd(r, prices[name]) for r in mine)
            print(f"{name}: {len(mine)} calls, spent {spent:.5f} of {budget}; one call at most {one:.5f}")
            assert abs(spent - budget) <= one, (name, spent, one)
            planned[name] = len(mine)
        assert planned["cheap"] > planned["dear"]  # the dearer judge stopped sooner
        assert code == 1 and "budget" in out.err  # incomplete: the same command continues
        requests = server.requests
        assert requests == len(first)

        assert main(["audit", str(path), "--budget", str(budget)]) == 1  # continues, within budget again
        second = list(log.read(tmp_path / "run"))[len(first):]
        assert second and not {r.key for r in second} & {r.key for r in first}
        assert main(["audit", str(path)]) == 0  # without a budget: the rest
        records = list(log.read(tmp_path / "run"))
        ok = Counter(r.key for r in records if r.status == "ok")
        assert len(ok) == len(records) == server.requests and max(ok.values()) == 1  # nothing asked twice
    stats = _stats(tmp_path / "run")
    for j in stats["judges"]:
        mine = [r for r in records if r.judge == j["judge"]]
        assert j["spend"]["total"] == pytest.approx(sum(_usd(r, prices[j["judge"]]) for r in mine), abs=3e-6)


def test_spend_in_the_summary_line_and_the_report(tmp_path, capsys):
    with FakeJudgeServer() as server:
        judges = [{"name": "j", "backend": "openai", "model": "m", "endpoint": server.url, "price": PRICE},
                  {"name": "free", "backend": "openai", "model": "m2", "endpoint": server.url}]
        path = write_manifest(tmp_path, judges, corpus=CORPUS)
        assert main(["audit", str(path)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    by_name = {j["judge"]: j for j in _stats(tmp_path / "run")["judges"]}
    spend = by_name["j"]["spend"]
    assert first.endswith(f"; spent {spend['total']:.4f} USD")
    assert by_name["free"]["spend"] is None  # no price, no ledger
    report = (tmp_path / "run" / "report.md").read_text()
    section = report.split("## Spend", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| t | j |")]
    assert rows[0].startswith("| t | j | all |") and rows[0].endswith(f"| 0 | {spend['total']:,.4f} USD |")
    assert [r.split(" | ")[2] for r in rows[1:]] == sorted(CORPUS["languages"])
    assert "| t | free |" not in section
    html = (tmp_path / "run" / "report.html").read_text()
    assert "<h2>Spend</h2>" in html and f"{spend['total']:,.4f} USD" in html
    # a run without prices has no Spend section
    (tmp_path / "p").mkdir()
    plain = write_manifest(tmp_path / "p", [{"name": "s", "backend": "simulated"}], corpus=CORPUS)
    assert quiet_audit(plain).exit_code == 0
    assert "## Spend" not in (tmp_path / "p" / "run" / "report.md").read_text()

"""The cost ledger: spend from the loopback server's reported usage and the
manifest's prices, per judge, language and call kind; ``audit --budget``."""

from __future__ import annotations

from collections import Counter

import msgspec
import pytest

from babelrun.app.cli import main
from babelrun.store import compact, log
from babelrun.testing import FakeJudgeServer
from helpers import quiet_audit, write_manifest

CORPUS = {"sources": [{"kind": "bundled"}], "languages": ["en", "hi", "zh"], "references_per_language": 3}
PRICE = {"input_per_mtok": 3.0, "cached_input_per_mtok": 0.3, "output_per_mtok": 15.0}
KEY_ENV = "BABELRUN_LEDGER_KEY"


def _usd(r, price) -> float:
    """One record's cost, from its tokens: computed here, apart from engine/ledger.py. Input
    written to Anthropic's prompt cache costs 1.25 × input unless the price says otherwise."""
    cached, written = r.tokens_cached or 0, r.tokens_cache_write or 0
    cached_rate = price.get("cached_input_per_mtok", price["input_per_mtok"])
    write_rate = price.get("cache_write_per_mtok", 1.25 * price["input_per_mtok"])
    return ((r.tokens_in - cached - written) * price["input_per_mtok"] + cached * cached_rate
            + written * write_rate + r.tokens_out * price.get("output_per_mtok", 0.0)) / 1e6


def _stats(run_dir) -> dict:
    return msgspec.json.decode((run_dir / "stats.json").read_bytes())


@pytest.mark.parametrize("proto", ["openai", "anthropic", "gemini"])
def test_spend_equals_an_independent_sum_over_the_log(proto, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "k")
    # Anthropic also reports input written to its prompt cache (priced at 1.25 × input)
    written = 0.2 if proto == "anthropic" else 0.0
    with FakeJudgeServer(cached_share=0.5, cache_write_share=written, faults=[500, 503, 500],
                         retry_after=0.01) as server:
        judge = {"name": "j", "backend": proto, "model": "m", "endpoint": server.endpoint(proto),
                 "api_key_env": KEY_ENV, "concurrency": 4, "price": PRICE}
        if proto == "anthropic":  # an option of Anthropic's backend alone
            judge["prompt_cache"] = True
        path = write_manifest(tmp_path, [judge], corpus=CORPUS)
        result = quiet_audit(path)
        last_body = server.last_body
    assert result.exit_code == 0
    records = log.final_records(log.read(tmp_path / "run"))
    assert all(r.tokens_cached and 0 < r.tokens_cached < r.tokens_in for r in records)  # read from the usage
    if proto == "anthropic":  # cache_creation_input_tokens, part of tokens_in
        assert all(r.tokens_cache_write and r.tokens_cached + r.tokens_cache_write < r.tokens_in for r in records)
        table = compact.load(tmp_path / "run", ["tokens_cache_write"])  # kept in the Parquet too
        assert sorted(table["tokens_cache_write"].to_pylist()) == sorted(r.tokens_cache_write for r in records)
    else:
        assert all(r.tokens_cache_write is None for r in records)
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


def test_an_explicit_cache_write_price_is_used(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "k")
    price = {**PRICE, "cache_write_per_mtok": 30.0}  # far from 1.25 × input: the default would show
    with FakeJudgeServer(cached_share=0.25, cache_write_share=0.5) as server:
        judge = {"name": "j", "backend": "anthropic", "model": "m", "endpoint": server.endpoint("anthropic"),
                 "api_key_env": KEY_ENV, "price": price}
        assert quiet_audit(write_manifest(tmp_path, [judge], corpus=CORPUS)).exit_code == 0
    records = log.final_records(log.read(tmp_path / "run"))
    spend = _stats(tmp_path / "run")["judges"][0]["spend"]["total"]
    assert spend == pytest.approx(sum(_usd(r, price) for r in records), abs=1e-6)
    assert spend != pytest.approx(sum(_usd(r, PRICE) for r in records), abs=1e-4)


PRICES_YAML = """\
m1: {input_per_mtok: 2.0, output_per_mtok: 8.0}
m2: {input_per_mtok: 100.0, output_per_mtok: 100.0}
"""


def test_a_price_file_prices_judges_without_price_and_the_manifest_price_wins(tmp_path):
    (tmp_path / "prices.yaml").write_text(PRICES_YAML)
    with FakeJudgeServer() as server:
        judges = [{"name": "filed", "backend": "openai", "model": "m1", "endpoint": server.url,
                   "price_file": "prices.yaml"},  # relative to the manifest
                  {"name": "own", "backend": "openai", "model": "m2", "endpoint": server.url,
                   "price_file": "prices.yaml", "price": {"input_per_mtok": 1.0, "output_per_mtok": 1.0}}]
        assert quiet_audit(write_manifest(tmp_path, judges, corpus=CORPUS)).exit_code == 0
    records = log.final_records(log.read(tmp_path / "run"))
    by_name = {j["judge"]: j["spend"]["total"] for j in _stats(tmp_path / "run")["judges"]}
    filed = [r for r in records if r.judge == "filed"]
    own = [r for r in records if r.judge == "own"]
    assert by_name["filed"] == pytest.approx(sum(_usd(r, {"input_per_mtok": 2.0, "output_per_mtok": 8.0})
                                                 for r in filed), abs=1e-6)
    assert by_name["own"] == pytest.approx(sum(_usd(r, {"input_per_mtok": 1.0, "output_per_mtok": 1.0})
                                               for r in own), abs=1e-6)


@pytest.mark.parametrize(("content", "field", "says"), [
    (None, "judges[0].price_file", "cannot read"),
    ("m1: [1, 2\n", "judges[0].price_file", "not YAML or JSON"),
    ("- 1\n- 2\n", "judges[0].price_file", "must map model names to prices"),
    ("other: {input_per_mtok: 1.0}\n", "judges[0].price_file", "no entry for model 'm1'"),
    ("m1: {input_per_mtok: cheap}\n", "judges[0].price_file['m1'].input_per_mtok", "expected `float`"),
    ("m1: {input_per_mtok: -1}\n", "judges[0].price_file['m1'].input_per_mtok", ">= 0"),
    ("m1: {input_per_mtok: 1.0, output_per_mtk: 2}\n", "judges[0].price_file['m1']", "unknown field"),
])
def test_a_bad_price_file_is_one_line_naming_the_field(content, field, says, tmp_path, capsys):
    if content is not None:
        (tmp_path / "prices.yaml").write_text(content)
    judge = {"name": "j", "backend": "openai", "model": "m1", "endpoint": "http://127.0.0.1:9/v1",
             "price_file": "prices.yaml"}
    path = write_manifest(tmp_path, [judge], corpus=CORPUS)
    for command in ("validate", "audit"):
        assert main([command, str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"{field}:" in err and says in err, err
    assert not (tmp_path / "run").exists()  # nothing written

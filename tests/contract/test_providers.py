"""One contract, every HTTP provider: the same suite runs over openai, anthropic and gemini
against the fake server speaking each one's wire format (``babelrun.testing.WIRE_FORMATS``), the
way msgspec's tests/unit/test_common.py runs one suite over every format with a ``proto``
fixture. What differs per provider (Anthropic's 529, Gemini's RetryInfo and API_KEY_INVALID,
OpenAI's presets and logprobs) stays in test_<provider>.py. The in-process backends' side of
the contract is test_judges.py."""

from __future__ import annotations

import pytest

import babelrun
from babelrun.app.cli import main
from babelrun.plan import Plan
from babelrun.store import log
from babelrun.testing import FakeJudgeServer, choose
from helpers import files_bytes, quiet_audit, write_manifest

SECRET = "sk-contract-Zq81-never-log-me"
KEY_ENV = "BABELRUN_CONTRACT_KEY"
# The wire formats of the HTTP backends (every preset speaks openai's); test_judges.py checks
# that every registered remote backend is one of them.
HTTP_PROVIDERS = ("openai", "anthropic", "gemini")


@pytest.fixture(params=HTTP_PROVIDERS)
def proto(request) -> str:
    return request.param


def judge_spec(proto: str, server: FakeJudgeServer, **extra) -> dict:
    spec = {"name": "remote", "backend": proto, "model": "judge-model", "endpoint": server.endpoint(proto),
            "api_key_env": KEY_ENV, "concurrency": 4, "retries": 4, "timeout_s": 5}
    spec.update(extra)
    return spec


def test_audit_end_to_end(proto, tmp_path, monkeypatch, small_corpus):
    monkeypatch.setenv(KEY_ENV, SECRET)
    with FakeJudgeServer(api_key=SECRET, model="served-1") as server:
        path = write_manifest(tmp_path, [judge_spec(proto, server)], corpus=small_corpus)
        result = quiet_audit(path)
    assert result.exit_code == 0
    records = list(log.read(tmp_path / "run"))
    assert len(records) == result.planned_calls == server.requests
    assert {r.status for r in records} == {"ok"}
    assert {r.served_model for r in records} == {"served-1"}
    assert all(r.tokens_in and r.tokens_out == 1 for r in records)
    items = {i.item_id: i for i in Plan.from_manifest(babelrun.load_manifest(path)).items()}
    for r in records:  # the verdicts are the server's, mapped through the order
        item = items[r.item_id]
        a, b = (item.reference, item.perturbed) if r.order == "ref_first" else (item.perturbed, item.reference)
        assert r.slot == choose(f"[Answer A]\n{a}\n[End of Answer A]\n\n[Answer B]\n{b}\n[End of Answer B]")
    assert result.cards.judges[0].overall.order_consistency.value == 1.0
    assert SECRET.encode() not in files_bytes(tmp_path / "run")


def test_transient_faults_are_retried_and_counted(proto, tmp_path, monkeypatch, small_corpus):
    monkeypatch.setenv(KEY_ENV, SECRET)
    faults = [429, 500, 0, 503, 429, 502]
    with FakeJudgeServer(api_key=SECRET, faults=faults, retry_after=0.01) as server:
        path = write_manifest(tmp_path, [judge_spec(proto, server)], corpus=small_corpus)
        result = quiet_audit(path)
    assert result.exit_code == 0
    final = log.final_records(log.read(tmp_path / "run"))
    assert len(final) == result.planned_calls
    assert server.requests == result.planned_calls + len(faults)
    assert sum(r.attempts - 1 for r in final) == len(faults)
    assert result.stats.judges[0].rate_limited == 2


def test_bad_key_stops_the_judge_fast_without_echoing_it(proto, tmp_path, monkeypatch, capsys, small_corpus):
    monkeypatch.setenv(KEY_ENV, "wrong-key-4417")
    with FakeJudgeServer(api_key=SECRET) as server:
        path = write_manifest(tmp_path, [judge_spec(proto, server), {"name": "sim", "backend": "simulated"}],
                              corpus=small_corpus)
        code = main(["audit", str(path)])
        requests = server.requests
    out, err = capsys.readouterr()
    assert code == 1
    assert "judge 'remote' stopped: HTTP 401" in err and "Incorrect API key" in err
    assert "wrong-key-4417" not in out + err
    assert requests <= 4  # within the calls already in flight (concurrency 4)
    records = list(log.read(tmp_path / "run"))
    remote = [r for r in records if r.judge == "remote"]
    assert remote and all(r.status == "error" and r.error_kind == "unauthorized" for r in remote)
    assert all(r.status == "ok" for r in records if r.judge == "sim")
    assert b"wrong-key-4417" not in files_bytes(tmp_path / "run")


def test_a_rejected_request_on_every_call_trips_the_breaker(proto, tmp_path, monkeypatch, small_corpus):
    monkeypatch.setenv(KEY_ENV, SECRET)
    with FakeJudgeServer(api_key=SECRET, faults=[400] * 50) as server:
        spec = judge_spec(proto, server, concurrency=1, max_consecutive_failures=5)
        result = quiet_audit(write_manifest(tmp_path, [spec], corpus=small_corpus))
    assert result.exit_code == 1
    assert server.requests == 5  # a rejection is not retried
    assert len(result.stop_reasons) == 1 and "stopped after 5 failed calls in a row" in result.stop_reasons[0]
    assert "injected 400" in result.stop_reasons[0]
    records = list(log.read(tmp_path / "run"))
    assert len(records) == 5 and all(r.status == "error" and r.error_kind == "rejected" for r in records)


def test_exhausted_retries_are_recorded_and_retried_on_resume(proto, tmp_path, monkeypatch, small_corpus):
    monkeypatch.setenv(KEY_ENV, SECRET)
    with FakeJudgeServer(api_key=SECRET, faults=[500] * 3) as server:
        path = write_manifest(tmp_path, [judge_spec(proto, server, retries=0, concurrency=1)], corpus=small_corpus)
        first = quiet_audit(path)
        assert first.exit_code == 1 and first.failed_calls == 3
        second = quiet_audit(path)
    assert second.exit_code == 0 and second.new_records == 3
    records = list(log.read(tmp_path / "run"))
    assert sum(r.status == "error" and r.error_kind == "server_error" for r in records) == 3
    assert len(log.final_records(records)) == first.planned_calls

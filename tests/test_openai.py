"""The openai backend against a real OpenAI-compatible aiohttp server on 127.0.0.1."""

import msgspec

import babelrun
from babelrun.app import audit as run
from babelrun.app.cli import main
from babelrun.plan import Plan
from babelrun.store import log
from babelrun.testing import FakeJudgeServer, choose
from helpers import files_bytes, write_manifest

SECRET = "sk-test-abc123-never-log-me"


def _judge(server, **extra):
    spec = {"name": "remote", "backend": "openai", "model": "judge-model", "endpoint": server.url,
            "api_key_env": "BABELRUN_TEST_KEY", "concurrency": 4, "retries": 4, "timeout_s": 5}
    spec.update(extra)
    return spec



def test_audit_end_to_end_through_openai_backend(tmp_path, monkeypatch, small_corpus):
    monkeypatch.setenv("BABELRUN_TEST_KEY", SECRET)
    with FakeJudgeServer(api_key=SECRET) as server:
        path = write_manifest(tmp_path, [_judge(server)], corpus=small_corpus)
        result = run.audit(babelrun.load_manifest(path), handle_signals=False)
    assert result.exit_code == 0
    records = list(log.read(tmp_path / "run"))
    assert len(records) == result.planned_calls == server.requests
    assert {r.status for r in records} == {"ok"}
    assert {r.served_model for r in records} == {"fake-judge-1"}
    assert {r.fingerprint for r in records} == {"fp_fake"}
    assert all(r.tokens_in and r.tokens_out == 1 for r in records)
    assert {r.lang for r in records} == {"en", "hi", "zh"}
    # The verdicts are the server's, mapped through the order: reconstruct them.
    items = {i.item_id: i for i in Plan.from_manifest(babelrun.load_manifest(path)).items()}
    for r in records:
        item = items[r.item_id]
        a, b = (item.reference, item.perturbed) if r.order == "ref_first" else (item.perturbed, item.reference)
        prompt = f"[Answer A]\n{a}\n[End of Answer A]\n\n[Answer B]\n{b}\n[End of Answer B]"
        assert r.slot == choose(prompt)
    # A content-consistent judge is perfectly order-consistent.
    assert result.cards.judges[0].overall.order_consistency.value == 1.0
    assert server.authorizations == {f"Bearer {SECRET}"}
    assert SECRET.encode() not in files_bytes(tmp_path / "run")


def test_transient_faults_are_retried_and_counted(tmp_path, monkeypatch, small_corpus):
    monkeypatch.setenv("BABELRUN_TEST_KEY", SECRET)
    faults = [429, 500, 0, 503, 429, 502]
    with FakeJudgeServer(api_key=SECRET, faults=faults, retry_after=0.01) as server:
        path = write_manifest(tmp_path, [_judge(server)], corpus=small_corpus)
        result = run.audit(babelrun.load_manifest(path), handle_signals=False)
    assert result.exit_code == 0
    final = log.final_records(log.read(tmp_path / "run"))
    assert len(final) == result.planned_calls
    assert server.requests == result.planned_calls + len(faults)
    assert sum(r.attempts - 1 for r in final) == len(faults)


def test_bad_key_stops_the_judge_fast_with_a_clear_message(tmp_path, monkeypatch, capsys, small_corpus):
    monkeypatch.setenv("BABELRUN_TEST_KEY", "wrong-key")
    with FakeJudgeServer(api_key=SECRET) as server:
        path = write_manifest(tmp_path, [_judge(server), {"name": "sim", "backend": "simulated"}],
                              corpus=small_corpus)
        code = main(["audit", str(path)])
        requests = server.requests
    err = capsys.readouterr().err
    assert code == 1
    assert "judge 'remote' stopped: HTTP 401" in err and "Incorrect API key" in err
    assert "wrong-key" not in err
    assert requests <= 4  # stops within the calls already in flight (concurrency 4)
    for seg in log.segments(tmp_path / "run"):  # the log is intact: every line a whole record
        lines = seg.read_bytes().split(b"\n")
        assert lines[-1] == b"" and all(msgspec.json.decode(x, type=log.Record) for x in lines[:-1])
    records = list(log.read(tmp_path / "run"))
    remote = [r for r in records if r.judge == "remote"]
    assert remote and all(r.status == "error" and r.error_kind == "unauthorized" for r in remote)
    # The other judge finished; its cards exist.
    sim = [r for r in records if r.judge == "sim"]
    assert sim and all(r.status == "ok" for r in sim)
    cards = msgspec.json.decode((tmp_path / "run" / "cards.json").read_bytes())
    assert [j["judge"] for j in cards["judges"]] == ["sim"]


def test_exhausted_retries_are_recorded_and_retried_on_resume(tmp_path, monkeypatch, small_corpus):
    monkeypatch.setenv("BABELRUN_TEST_KEY", SECRET)
    with FakeJudgeServer(api_key=SECRET, faults=[500] * 3, retry_after=0.01) as server:
        spec = _judge(server, retries=0, concurrency=1)
        path = write_manifest(tmp_path, [spec], corpus=small_corpus)
        first = run.audit(babelrun.load_manifest(path), handle_signals=False)
        assert first.exit_code == 1 and first.failed_calls == 3
        second = run.audit(babelrun.load_manifest(path), handle_signals=False)
    assert second.exit_code == 0 and second.new_records == 3
    records = list(log.read(tmp_path / "run"))
    assert sum(r.status == "error" for r in records) == 3
    assert len(log.final_records(records)) == first.planned_calls


def test_soft_verdicts_from_logprobs(tmp_path, small_corpus):
    import math

    from babelrun.testing import SOFT

    with FakeJudgeServer() as server:
        judge = {"name": "soft", "backend": "openai", "model": "m", "endpoint": server.url, "soft": True}
        path = write_manifest(tmp_path, [judge], corpus=small_corpus)
        result = run.audit(babelrun.load_manifest(path), handle_signals=False)
    assert result.exit_code == 0
    records = list(log.read(tmp_path / "run"))
    slot_mass = SOFT[0] + SOFT[1] + SOFT[2]  # the stray token names no slot
    for r in records:
        assert math.isclose(r.p_a + r.p_b + r.p_tie, 1.0, abs_tol=1e-5)
        chosen = r.p_a if r.raw == "A" else r.p_b
        assert math.isclose(chosen, SOFT[0] / slot_mass, abs_tol=1e-5)
        assert r.slot == r.raw  # the argmax is the server's choice
    card = result.cards.judges[0].overall
    assert card.soft_margin is not None and card.soft_margin.n == len(records)
    assert -1 <= card.soft_margin.value <= 1


def test_soft_needs_a_backend_with_logprobs(tmp_path):
    import pytest

    from babelrun.errors import ManifestError

    judge = {"name": "s", "backend": "ollama", "model": "m", "soft": True}  # Ollama offers no logprobs
    path = write_manifest(tmp_path, [judge])
    with pytest.raises(ManifestError, match="log-probabilities"):
        babelrun.load_manifest(path)


def test_presets_reach_their_default_endpoints_with_their_key(tmp_path, monkeypatch):
    from babelrun.judges import build
    from babelrun.judges.presets import PRESETS
    from babelrun.manifest import JudgeSpec

    monkeypatch.setenv("GROQ_API_KEY", "gk")
    groq = build(JudgeSpec(name="g", backend="groq", model="llama"), 0)
    assert groq.url == "https://api.groq.com/openai/v1/chat/completions"
    assert groq._headers["Authorization"] == "Bearer gk"
    local = build(JudgeSpec(name="o", backend="ollama", model="qwen"), 0)
    assert local.url == "http://localhost:11434/v1/chat/completions" and "Authorization" not in local._headers
    # Another endpoint: only the key the judge names.
    other = build(JudgeSpec(name="x", backend="openai", model="m", endpoint="http://127.0.0.1:9/v1"), 0)
    assert "Authorization" not in other._headers
    assert {"vllm", "llamacpp_server", "ollama", "lmstudio", "groq", "together", "mistral", "deepseek",
            "openrouter", "fireworks"} <= set(PRESETS)
    # A hosted preset without its key is a manifest error naming the variable.
    monkeypatch.delenv("MISTRAL_API_KEY", raising=False)
    path = write_manifest(tmp_path, [{"name": "m", "backend": "mistral", "model": "mistral-small"}])
    import pytest

    from babelrun.errors import ManifestError

    with pytest.raises(ManifestError, match="MISTRAL_API_KEY is not set"):
        babelrun.load_manifest(path)


def test_a_preset_audits_through_the_loopback_server(tmp_path, small_corpus):
    with FakeJudgeServer() as server:
        judge = {"name": "v", "backend": "vllm", "model": "m", "endpoint": server.url, "soft": True}
        path = write_manifest(tmp_path, [judge], corpus=small_corpus)
        result = run.audit(babelrun.load_manifest(path), handle_signals=False)
    assert result.exit_code == 0 and result.cards.judges[0].overall.soft_margin is not None

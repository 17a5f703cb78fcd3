"""The openai backend against a real OpenAI-compatible aiohttp server on 127.0.0.1."""

import babelrun
from babelrun.judges import judge_spec
from babelrun.store import log
from babelrun.testing import FakeJudgeServer
from helpers import quiet_audit, write_manifest

SECRET = "sk-test-abc123-never-log-me"


def _judge(server, **extra):
    spec = {"name": "remote", "backend": "openai", "model": "judge-model", "endpoint": server.url,
            "api_key_env": "BABELRUN_TEST_KEY", "concurrency": 4, "retries": 4, "timeout_s": 5}
    spec.update(extra)
    return spec


def test_soft_verdicts_from_logprobs(tmp_path, small_corpus):
    import math

    from babelrun.testing import SOFT

    with FakeJudgeServer() as server:
        judge = {"name": "soft", "backend": "openai", "model": "m", "endpoint": server.url, "soft": True}
        path = write_manifest(tmp_path, [judge], corpus=small_corpus)
        result = quiet_audit(path)
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

    monkeypatch.setenv("GROQ_API_KEY", "gk")
    groq = build(judge_spec(name="g", backend="groq", model="llama"), 0)
    assert groq.url == "https://api.groq.com/openai/v1/chat/completions"
    assert groq._headers["Authorization"] == "Bearer gk"
    local = build(judge_spec(name="o", backend="ollama", model="qwen"), 0)
    assert local.url == "http://localhost:11434/v1/chat/completions" and "Authorization" not in local._headers
    # Another endpoint: only the key the judge names.
    other = build(judge_spec(name="x", backend="openai", model="m", endpoint="http://127.0.0.1:9/v1"), 0)
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
        result = quiet_audit(path)
    assert result.exit_code == 0 and result.cards.judges[0].overall.soft_margin is not None

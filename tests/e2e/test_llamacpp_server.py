"""The ``llamacpp_server`` preset audited against llama-cpp-python's real OpenAI-compatible
server (``python -m llama_cpp.server``) with the Gemma 3 270M GGUF on 127.0.0.1."""

import math

import pytest

from babelrun.app import localserver
from babelrun.store import log
from helpers import needs_llama_cpp, quiet_audit, write_manifest

needs_llama_cpp()  # the server runs the same llama.cpp
if not localserver.available():
    pytest.skip("llama-cpp-python's server is not installed (pip install babelrun[server])", allow_module_level=True)


@pytest.fixture(scope="module")
def server():
    with localserver.llama_server("gemma3-270m", threads=2) as url:
        yield url


def test_llamacpp_server_preset_end_to_end(tmp_path, server):
    judges = [{"name": "gemma-server", "backend": "llamacpp_server", "endpoint": server, "model": "gemma3-270m",
               "max_tokens": 4, "concurrency": 2},
              {"name": "gemma-server-soft", "backend": "llamacpp_server", "endpoint": server,
               "model": "gemma3-270m", "soft": True, "concurrency": 2}]
    corpus = {"languages": ["en"], "references_per_language": 2}
    path = write_manifest(tmp_path, judges, corpus=corpus, perturbations=[{"name": "truncate", "severities": [0.6]}])
    result = quiet_audit(path)
    assert result.exit_code == 0
    records = list(log.read(tmp_path / "run"))
    assert len(records) == result.planned_calls == 8
    assert all(r.status == "ok" for r in records)
    assert {r.served_model for r in records} == {"gemma3-270m"}  # the server's own name for its model
    assert all(r.tokens_in and r.tokens_in > 100 for r in records)  # the whole prompt reached the model
    soft = [r for r in records if r.judge == "gemma-server-soft"]
    assert soft and all(r.tokens_out == 1 for r in soft)  # one token, with its top-20 logprobs
    for r in soft:
        # The base model behind the server's fallback chat format (Gemma 270M has no chat
        # template) seldom puts A or B among its top 20: then the verdict is invalid, not guessed.
        if r.p_a is None:
            assert r.slot == "invalid"
        else:
            assert math.isclose(r.p_a + r.p_b + r.p_tie, 1.0, abs_tol=1e-5)
    assert {card.judge for card in result.cards.judges} == {"gemma-server", "gemma-server-soft"}
    assert all(card.overall.presentations == 4 for card in result.cards.judges)

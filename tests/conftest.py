from __future__ import annotations

import pytest


@pytest.fixture
def small_corpus() -> dict:
    """Three languages in three scripts, three references each: a quick plan."""
    return {"sources": [{"kind": "bundled"}], "languages": ["en", "hi", "zh"],
            "references_per_language": 3}


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    # Loopback only: make sure no proxy variable sends test traffic anywhere else.
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    yield

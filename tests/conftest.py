"""Fixtures and the folder markers every test shares.

Every test collected under ``tests/e2e`` is marked ``e2e`` (whole audits in-process and as
``babelrun`` subprocesses, real data sets, real browsers and local models), so that
``pytest -m "not e2e"`` is the fast inner loop (unit + contract). Every test under
``tests/hostile`` (corrupted run directories, leaking keys, full disks, out-of-bounds numbers) is
marked ``hostile``, and ``e2e`` too: most attack whole audits, so the fast loop leaves them out;
``pytest -m hostile`` runs just these."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
# A test's folder → the markers each test in it gets.
FOLDER_MARKERS = {HERE / "e2e": ("e2e",), HERE / "hostile": ("hostile", "e2e")}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        parents = Path(item.path).resolve().parents
        for folder, names in FOLDER_MARKERS.items():
            if folder in parents:
                for name in names:
                    item.add_marker(getattr(pytest.mark, name))


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

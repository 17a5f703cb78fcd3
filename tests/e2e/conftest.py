"""Whole audits (in-process and as ``babelrun`` subprocesses), real data sets, real browsers and
local models: every test collected under ``tests/e2e`` is marked ``e2e``, so that
``pytest -m "not e2e"`` is the fast inner loop (unit + contract)."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Called with every collected item, not only this folder's: mark only ours.
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.e2e)

"""Hostile inputs: corrupted run directories, leaking keys, full disks, out-of-bounds numbers.
Every test here is marked ``hostile``, and ``e2e`` too: most attack whole audits (a finished
run, a provider that misbehaves), so ``pytest -m "not e2e"`` leaves them out of the fast loop;
``pytest -m hostile`` runs just these."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helpers import quiet_audit, simulated, write_manifest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Called with every collected item, not only this folder's: mark only ours.
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.hostile)
            item.add_marker(pytest.mark.e2e)



@pytest.fixture(scope="session")
def _finished(tmp_path_factory):
    folder = tmp_path_factory.mktemp("finished")
    path = write_manifest(folder, [simulated("sim", default_accuracy=0.8, invalid_rate=0.05)],
                          corpus={"sources": [{"kind": "bundled"}], "languages": ["en", "hi"],
                                  "references_per_language": 3},
                          perturbations=[{"name": "truncate", "severities": [0.3, 0.6]},
                                         {"name": "shuffle", "severities": [0.5]}],
                          log={"segment_mb": 0.002})  # several small segments
    assert quiet_audit(path).exit_code == 0
    return folder


@pytest.fixture
def finished(_finished, tmp_path):
    """A copy of a finished small simulated run: (folder, manifest path, run directory)."""
    folder = tmp_path / "f"
    shutil.copytree(_finished, folder)
    return folder, folder / "manifest.yaml", folder / "run"

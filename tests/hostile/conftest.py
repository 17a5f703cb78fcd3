"""A finished small simulated run, shared by the hostile tests that attack one (each gets a copy)."""

from __future__ import annotations

import shutil

import pytest

from helpers import quiet_audit, simulated, write_manifest


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

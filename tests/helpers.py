"""Helpers shared by the tests (imported as `helpers`)."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"


def write_manifest(folder: Path, judges: list[dict], **fields) -> Path:
    """A manifest file in ``folder`` with an output dir inside it; ``fields`` override."""
    body = {"name": "t", "output_dir": "run", "seed": 1, "judges": judges,
            "scoring": {"bootstrap": 200}}
    body.update(fields)
    path = folder / "manifest.yaml"
    path.write_bytes(msgspec.yaml.encode(body))
    return path


def simulated(name: str = "sim", **knobs) -> dict:
    return {"name": name, "backend": "simulated", "simulated": knobs}


def env_without(*names: str) -> dict:
    return {k: v for k, v in os.environ.items() if k not in names}


def files_bytes(folder: Path) -> bytes:
    """Every file under ``folder``, concatenated: to assert a secret appears in none."""
    return b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())


def quiet_audit(path: Path):
    """``babelrun audit`` in-process: no signal handlers, no progress output."""
    import io

    import babelrun
    from babelrun import run
    from babelrun.progress import Progress

    return run.audit(babelrun.load_manifest(path), handle_signals=False,
                     progress=Progress(stream=io.StringIO(), interval=60))

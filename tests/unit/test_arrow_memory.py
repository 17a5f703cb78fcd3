"""The CLI's Arrow allocator settings (``app.cli._lean_arrow``) reach every Arrow allocation,
the Parquet reader's included: ``pa.set_memory_pool`` alone leaves the reader on the C++
default pool (mimalloc), which kept ~100 MB resident through a 508,820-call audit's report
with no Arrow buffer alive. Each case runs in a fresh interpreter: the settings
are read when libarrow loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the settings are Linux's")

_READ = r"""
import json, os, sys
from babelrun.app.cli import _lean_arrow
if sys.argv[1] == "lean":
    _lean_arrow()
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
pq.write_table(pa.table({"x": np.arange(200_000), "s": [str(i) for i in range(200_000)]}), sys.argv[2])
table = pq.read_table(sys.argv[2])
del table
print(json.dumps({"mimalloc": pa.mimalloc_memory_pool().max_memory(),
                  "jemalloc": pa.jemalloc_memory_pool().max_memory(),
                  "pool": os.environ.get("ARROW_DEFAULT_MEMORY_POOL"),
                  "conf": os.environ.get("JE_ARROW_MALLOC_CONF")}))
"""


def _read(tmp_path, mode: str, **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ARROW_", "JE_ARROW_"))}
    out = subprocess.run([sys.executable, "-c", _READ, mode, str(tmp_path / "t.parquet")], env=clean | env,
                         capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout)


def test_the_parquet_reader_allocates_from_jemalloc_with_no_decay(tmp_path):
    try:
        import pyarrow as pa

        pa.jemalloc_memory_pool()
    except NotImplementedError:
        pytest.skip("a pyarrow build without jemalloc")
    plain, lean = _read(tmp_path, "plain"), _read(tmp_path, "lean")
    assert plain["mimalloc"] > 0  # without the settings the reader's buffers come from mimalloc
    assert lean["mimalloc"] == 0 and lean["jemalloc"] > 0
    assert lean["pool"] == "jemalloc" and lean["conf"] == "dirty_decay_ms:0,muzzy_decay_ms:0"


def test_a_users_own_allocator_settings_are_kept(tmp_path):
    mine = _read(tmp_path, "lean", ARROW_DEFAULT_MEMORY_POOL="mimalloc", JE_ARROW_MALLOC_CONF="dirty_decay_ms:50")
    assert mine["pool"] == "mimalloc" and mine["conf"] == "dirty_decay_ms:50"
    assert mine["mimalloc"] > 0

"""The ``babelrun`` program's Arrow set-up (``app.cli``). Its allocator settings
(``_lean_arrow``) reach every Arrow allocation, the Parquet reader's included:
``pa.set_memory_pool`` alone leaves the reader on the C++ default pool (mimalloc), which kept
~100 MB resident through a 508,820-call audit's report with no Arrow buffer alive. And its
audit never imports pandas where pandas is installed (``_arrow_without_pandas_probe``:
pyarrow's probes for pandas objects are answered once), while code in the same process still
converts DataFrames. Each case runs in a fresh interpreter: the settings are read when
libarrow loads, the probes' answers are kept for the process."""

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


_AUDIT = r"""
import json, sys
from babelrun.app.cli import main
code = main(["audit", sys.argv[1]], program=True)
imported = "pandas" in sys.modules
import pandas as pd
import pyarrow as pa
frame = pa.table({"x": [1, 2]}).to_pandas()  # pyarrow's pandas API imports it anew
back = pa.Table.from_pandas(pd.DataFrame({"c": pd.Categorical(["a", "b"])}))
print(json.dumps({"code": code, "imported": imported, "frame": type(frame).__name__,
                  "back": str(back.schema.field("c").type)}))
"""


def test_the_program_s_audit_never_imports_pandas_and_dataframes_still_convert(tmp_path, small_corpus):
    pytest.importorskip("pandas")  # where it is not installed there is nothing to avoid
    import msgspec

    manifest = tmp_path / "m.yaml"
    manifest.write_bytes(msgspec.yaml.encode({
        "name": "p", "output_dir": str(tmp_path / "run"), "corpus": small_corpus,
        "judges": [{"name": "sim", "backend": "simulated"}], "scoring": {"bootstrap": 20}}))
    out = subprocess.run([sys.executable, "-c", _AUDIT, str(manifest)], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen["code"] == 0 and (tmp_path / "run" / "judgements.parquet").exists()
    assert seen["imported"] is False  # the compaction, scoring and report made arrays without it
    assert seen["frame"] == "DataFrame" and seen["back"].startswith("dictionary")

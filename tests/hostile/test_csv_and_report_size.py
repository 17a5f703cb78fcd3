"""M10 and the report's size: CSV exports never hand a spreadsheet a formula (a judge name or
a provider's ``system_fingerprint`` of ``=HYPERLINK(...)``), while Parquet and JSON keep every
value verbatim; the report's matrix grows with judges × languages, not judges²."""

from __future__ import annotations

import csv
import importlib.util
import json
import re

import pyarrow.parquet as pq
import pytest

from babelrun.app.cli import main
from babelrun.report import html
from babelrun.testing import FakeJudgeServer
from helpers import ROOT, write_manifest

FORMULA = '=HYPERLINK("http://evil/","x")'
KEY_ENV = "BABELRUN_EXPORT_KEY"
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
NUMBER = re.compile(r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$")


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    """A finished run whose judge name, served model and fingerprint are spreadsheet formulas
    (the tests only export it, each into its own folder)."""
    tmp_path = tmp_path_factory.mktemp("hostile")
    with pytest.MonkeyPatch.context() as monkeypatch, FakeJudgeServer(fingerprint=FORMULA, model="@SUM(1+1)") as server:
        monkeypatch.setenv(KEY_ENV, "k")
        judges = [{"name": "+cmd|' /C calc'!A0", "backend": "openai", "model": "m", "endpoint": server.url,
                   "api_key_env": KEY_ENV, "retries": 0}]
        path = write_manifest(tmp_path, judges, corpus={"references_per_language": 2, "languages": ["en"]},
                              perturbations=[{"name": "truncate", "severities": [0.5]}])
        assert main(["audit", str(path)]) == 0
    return tmp_path / "run"


def _risky(cells):
    return [c for c in cells if c and c.startswith(FORMULA_START) and not NUMBER.match(c)]


def test_csv_cells_never_start_a_formula(hostile_run, tmp_path):
    out = tmp_path / "csv"
    assert main(["export", str(hostile_run), "--format", "csv", "--out", str(out)]) == 0
    seen = []
    for name in ("cards.csv", "presentations.csv"):
        with (out / name).open(newline="") as f:
            cells = [c for row in csv.reader(f) for c in row]
        assert _risky(cells) == [], name
        seen += cells
    # the hostile values are there, shown as text: a leading '
    assert "'" + FORMULA in seen and "'+cmd|' /C calc'!A0" in seen and "'@SUM(1+1)" in seen


def test_numbers_are_never_prefixed():
    import pyarrow as pa

    from babelrun.app.export import neutralise_formulas

    table = pa.table({"value": [-0.25, 1.0], "text": ["-0.5", "-1+A1"], "when": pa.array([1, 2], pa.int64())})
    out = neutralise_formulas(table)
    assert out["value"].to_pylist() == [-0.25, 1.0] and out["when"].to_pylist() == [1, 2]
    assert out["text"].to_pylist() == ["-0.5", "'-1+A1"]


def test_parquet_and_json_keep_values_verbatim(hostile_run, tmp_path):
    assert main(["export", str(hostile_run), "--out", str(tmp_path / "pq")]) == 0
    table = pq.read_table(tmp_path / "pq" / "presentations.parquet")
    assert set(table["fingerprint"].to_pylist()) == {FORMULA}
    assert main(["export", str(hostile_run), "--format", "json", "--out", str(tmp_path / "js")]) == 0
    rows = [json.loads(line) for line in (tmp_path / "js" / "presentations.jsonl").read_text().splitlines()]
    assert {r["fingerprint"] for r in rows} == {FORMULA} and {r["judge"] for r in rows} == {"+cmd|' /C calc'!A0"}


def _synthetic():
    spec = importlib.util.spec_from_file_location("report_scale", ROOT / "tests" / "unit" / "test_report_scale.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.synthetic


def _matrix_bytes(judges: int, langs: int) -> int:
    page = html.render(_synthetic()(judges, langs), [])
    return len(page.split('<section id="matrix">')[1].split("</section>")[0].encode())


def test_the_matrix_grows_with_judges_times_languages_not_judges_squared():
    """100 judges × 200 languages: the matrix section was 35.8 MB (one re-sorted view per judge,
    each with every judge's column); now each judge's view past 12 judges is its own column."""
    small, large = _matrix_bytes(20, 50), _matrix_bytes(80, 50)
    assert large / small < 4 * 1.25  # 4× the judges: about 4× the bytes (it was about 16×)
    assert _matrix_bytes(100, 200) < 3_000_000
    page = html.render(_synthetic()(100, 40), [])
    view = page.split('<div class=view id="m-j7">')[1].split("</div>")[0]
    assert all(row.count("<td") == 2 for row in re.findall(r"<tr><td class=l>.*?</tr>", view))
    assert "judge-7" in view and "judge-8" not in view

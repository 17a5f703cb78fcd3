"""What a run gives a user outside babelrun: tidy exports read back by pandas, polars and
DuckDB with cards.json's numbers, the notebook API, `show`, stats.json across processes,
`audit --limit / --judge`, validate's estimate, and progress lines that fit the terminal."""

from __future__ import annotations

import io
import json

import msgspec
import pyarrow.parquet as pq
import pytest

import babelrun
from babelrun.app.cli import main
from babelrun.engine.progress import Progress
from babelrun.errors import UserError
from helpers import quiet_audit, quiet_progress, simulated, write_manifest

CORPUS = {"sources": [{"kind": "bundled"}], "languages": ["en", "sw"], "references_per_language": 3}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("outputs")
    path = write_manifest(folder, [simulated("good", default_accuracy=0.9),
                                   simulated("leaning", default_accuracy=0.7, position_bias=0.3)],
                          corpus=CORPUS, scoring={"bootstrap": 50})
    assert quiet_audit(path).exit_code == 0
    return folder / "run"


def _cards_json(run_dir) -> dict:
    return json.loads((run_dir / "cards.json").read_text())


def _expected(run_dir) -> dict[tuple, tuple]:
    """(judge, lang, perturbation, metric) -> (value, lo, hi, n) straight from cards.json."""
    out = {}
    for j in _cards_json(run_dir)["judges"]:
        cards = [("all", "all", j["overall"])]
        for lc in j["languages"]:
            cards.append((lc["lang"], "all", lc["card"]))
            cards += [(lc["lang"], pc["perturbation"], pc["card"]) for pc in lc["perturbations"]]
        for lang, pert, card in cards:
            for metric, iv in card.items():
                if isinstance(iv, dict):
                    out[(j["judge"], lang, pert, metric)] = (iv["value"], iv["lo"], iv["hi"], iv["n"])
    return out


def test_cards_json_declares_its_schema_and_run(run_dir):
    cards = _cards_json(run_dir)
    assert list(cards)[:2] == ["schema_version", "run"] and cards["schema_version"] == 1
    assert cards["run"]["name"] == "t" and set(cards["run"]["judges"]) == {"good", "leaning"}
    assert cards["run"]["planned_items"] > 0
    assert b"-0.0," not in (run_dir / "cards.json").read_bytes()
    from babelrun.score.stats import rounded

    assert repr(rounded(-0.00001)) == "0.0"  # what used to be written as -0.0


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_export_reads_back_in_pandas_with_the_cards_numbers(run_dir, tmp_path, fmt):
    pd = pytest.importorskip("pandas")
    out = tmp_path / fmt
    assert main(["export", str(run_dir), "--format", fmt, "--out", str(out)]) == 0
    ext = "jsonl" if fmt == "json" else fmt
    read = {"parquet": pd.read_parquet, "csv": pd.read_csv,
            "json": lambda p: pd.read_json(p, lines=True, precise_float=True)}[fmt]
    cards = read(out / f"cards.{ext}")
    assert list(cards.columns) == ["run", "judge", "judge_id", "family", "lang", "perturbation", "metric",
                                   "value", "lo", "hi", "n"]
    expected = _expected(run_dir)
    got = {(r.judge, r.lang, r.perturbation, r.metric): (r.value, r.lo, r.hi, r.n)
           for r in cards.itertuples() if r.metric not in ("items", "presentations")}
    assert set(got) == set(expected)
    for key, (value, lo, hi, n) in expected.items():
        g = got[key]
        assert (None if pd.isna(g[0]) else g[0]) == value and g[3] == n, key
        assert (None if pd.isna(g[1]) else g[1]) == lo and (None if pd.isna(g[2]) else g[2]) == hi, key
    pres = read(out / f"presentations.{ext}")
    assert "item_key" not in pres.columns and pres["attempts"].notna().all()
    assert (pres["correct"] == (pres["verdict"] == "reference")).all()
    if fmt == "parquet":
        assert str(pq.read_schema(out / "presentations.parquet").field("ts").type) == "timestamp[us, tz=UTC]"


def test_export_in_polars_and_duckdb(run_dir, tmp_path):
    assert main(["export", str(run_dir), "--out", str(tmp_path)]) == 0
    expected = _expected(run_dir)
    r = expected[("good", "sw", "all", "reliability")]
    polars = pytest.importorskip("polars")
    frame = polars.read_parquet(tmp_path / "cards.parquet")
    row = frame.filter((polars.col("judge") == "good") & (polars.col("lang") == "sw")
                       & (polars.col("perturbation") == "all") & (polars.col("metric") == "reliability"))
    assert row.select(["value", "lo", "hi", "n"]).row(0) == r
    assert polars.read_parquet(tmp_path / "presentations.parquet")["ts"].dtype == polars.Datetime("us", "UTC")
    duckdb = pytest.importorskip("duckdb")
    got = duckdb.sql(f"select value, lo, hi, n from '{tmp_path / 'cards.parquet'}' where judge = 'good' "
                     "and lang = 'sw' and perturbation = 'all' and metric = 'reliability'").fetchall()
    assert got == [r]
    correct = duckdb.sql(f"select avg(correct::int) from '{tmp_path / 'presentations.parquet'}' "
                         "where judge = 'good'").fetchall()[0][0]
    assert correct == pytest.approx(expected[("good", "all", "all", "accuracy")][0], abs=1e-4)


def test_cards_to_pandas_and_polars(run_dir):
    cards = babelrun.score_run(str(run_dir))  # a string path
    table = cards.to_arrow("t")
    assert table.num_rows == len(_expected(run_dir)) + 2 * len(
        [k for k in _expected(run_dir) if k[3] == "accuracy"])  # + items and presentations
    pd = pytest.importorskip("pandas")
    assert isinstance(cards.to_pandas(), pd.DataFrame)
    polars = pytest.importorskip("polars")
    assert isinstance(cards.to_polars(), polars.DataFrame) and cards.to_polars().height == table.num_rows


def test_load_run_takes_a_string(run_dir):
    table = babelrun.load_run(str(run_dir), ["judge", "verdict"])
    assert table.num_rows > 0 and table.column_names == ["judge", "verdict"]
    with pytest.raises(UserError, match="not a babelrun run directory"):
        babelrun.load_run(str(run_dir.parent / "nowhere"))


async def test_audit_async_inside_a_running_event_loop(tmp_path):
    path = write_manifest(tmp_path, [simulated("sim")], corpus={**CORPUS, "languages": ["en"]},
                          scoring={"bootstrap": 0})
    with pytest.raises(UserError, match="audit_async"):  # the blocking call says what to use
        babelrun.audit(str(path))
    result = await babelrun.audit_async(str(path), progress=quiet_progress())
    assert result.exit_code == 0 and result.new_records == result.planned_calls > 0
    assert (tmp_path / "run" / "cards.json").exists()


def test_show_prints_the_item_as_the_judge_saw_it(run_dir, capsys):
    table = babelrun.load_run(run_dir, ["item_id", "kind", "judge"])
    item_id = table["item_id"][0].as_py()
    assert main(["show", str(run_dir), item_id[:10], "--judge", "good", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["item_id"] == item_id and shown["reference"] and shown["perturbed"]
    orders = {p["order"]: p for p in shown["presentations"]}
    assert set(orders) == {"ref_first", "pert_first"} and {p["judge"] for p in orders.values()} == {"good"}
    # The messages are the engine's: the reference in slot A first, then in slot B.
    user = {o: next(m["content"] for m in p["messages"] if m["role"] == "user") for o, p in orders.items()}
    assert f"[Answer A]\n{shown['reference']}\n" in user["ref_first"]
    assert f"[Answer B]\n{shown['perturbed']}\n" in user["ref_first"]
    assert f"[Answer A]\n{shown['perturbed']}\n" in user["pert_first"]
    assert f"[Answer B]\n{shown['reference']}\n" in user["pert_first"]
    assert all(p["raw"] is not None and p["latency_ms"] is not None for p in orders.values())
    assert main(["show", str(run_dir), item_id]) == 0
    text = capsys.readouterr().out
    assert text.count("=== ") == 4 and "--- user" in text  # two judges, two orders
    assert main(["show", str(run_dir), "ffffffffffffffff"]) == 2


def test_stats_json_accumulates_across_processes(tmp_path):
    path = write_manifest(tmp_path, [simulated("a"), simulated("b", default_accuracy=0.85)],
                          corpus={**CORPUS, "languages": ["en"]}, scoring={"bootstrap": 0})
    first = quiet_audit(path)
    again = quiet_audit(path)  # a rerun on a finished run: no calls
    assert again.new_records == 0
    stats = json.loads((tmp_path / "run" / "stats.json").read_text())
    assert len(stats["processes"]) == 2
    assert [j["calls"] for j in stats["judges"]] == [j.calls for j in first.stats.judges]
    assert [j["calls"] for j in stats["processes"][1]["judges"]] == [0, 0]
    assert all(j["calls_per_s"] > 0 for j in stats["judges"])


def test_audit_limit_and_judge(tmp_path, capsys):
    path = write_manifest(tmp_path, [simulated("a"), simulated("b", default_accuracy=0.85)],
                          corpus={**CORPUS, "languages": ["en"]}, scoring={"bootstrap": 0})
    assert main(["audit", str(path), "--limit", "5", "--judge", "a"]) == 0
    assert "presentation(s) left" in capsys.readouterr().out
    table = babelrun.load_run(tmp_path / "run", ["judge"])
    assert table["judge"].to_pylist() == ["a"] * 5
    assert main(["audit", str(path), "--judge", "nobody"]) == 2
    assert main(["audit", str(path)]) == 0  # the rest, and b
    counts = msgspec.json.decode((tmp_path / "run" / "stats.json").read_bytes())["judges"]
    assert {j["judge"]: j["ok"] for j in counts}["a"] == {j["judge"]: j["planned"] for j in counts}["a"]


def test_validate_estimates_tokens_and_cost(tmp_path, capsys):
    priced = {**simulated("priced"), "price": {"input_per_mtok": 2.5, "output_per_mtok": 10}}
    path = write_manifest(tmp_path, [priced, simulated("free", default_accuracy=0.85)],
                          corpus={**CORPUS, "languages": ["en"]})
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.strip().startswith("priced:"))
    calls = int(line.split(": ")[1].split(" calls")[0])
    tokens_in = int(line.split("~")[1].split(" tokens")[0].replace(",", ""))
    assert f"≤{calls * 8:,} tokens out" in line and "USD" in line
    assert f"{(tokens_in * 2.5 + calls * 8 * 10) / 1e6:,.2f} USD" in line
    assert "USD" not in next(x for x in out.splitlines() if x.strip().startswith("free:"))


@pytest.mark.parametrize("width", [40, 80, 120])
def test_live_progress_fits_the_terminal(width):
    from babelrun.engine import JudgeState

    stream = io.StringIO()
    p = Progress(stream=stream, interval=1, live=True, width=width)
    states = [JudgeState("a-judge-with-a-long-name", "ja", 123456, 10, ok=40, retries=12345, failed=3),
              JudgeState("b", "jb", 100, 0, ok=100)]
    states[1].ended = states[1].started + 4.0  # finished: its average rate, not 0
    p.draw(states)
    lines = [line.split("\x1b[2K")[-1] for line in stream.getvalue().splitlines()]
    assert lines and all(len(line) < width for line in lines)
    assert "25.0 calls/s" in lines[1] or width < 60

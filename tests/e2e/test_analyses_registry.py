"""The analyses registry (``babelrun.analyses.registry.ANALYSES``) is the one list of analyses:
every entry has its command (with ``--json``), its file, its place in the staleness check and
a report section in both formats; a new entry reaches all of them with no other edit."""

from __future__ import annotations

import argparse
import json
import os
import sys
import types
from pathlib import Path

import msgspec
import pytest

from babelrun.analyses import registry
from babelrun.app import cli
from babelrun.report import data as report_data
from babelrun.report.html import _ANALYSES as HTML_SECTIONS
from babelrun.report.markdown import _ANALYSES as MARKDOWN_SECTIONS
from babelrun.store import log
from helpers import quiet_audit, simulated


def _age(run_dir, name):
    """Make ``name`` older than the log's newest segment (as if the log grew after it)."""
    newest = max(seg.stat().st_mtime for seg in log.segments(run_dir))
    os.utime(run_dir / name, (newest - 60, newest - 60))


def test_every_entry_has_a_command_a_file_and_a_section_in_each_format():
    names = [a.name for a in registry.ANALYSES]
    assert {"calibrate", "invariance", "agree", "self-preference"} <= set(names)
    assert len(set(names)) == len(names) and len(set(registry.outputs())) == len(names)
    commands = {c.name: c for c in cli.COMMANDS}
    for a in registry.ANALYSES:
        assert a.name in commands and a.output.endswith(".json")
        assert a.output in (registry.outputs())
        assert isinstance(a.result_type, type) and callable(a.code().text)
        parser = argparse.ArgumentParser()
        commands[a.name].add_arguments(parser)
        help_text = parser.format_help()
        assert "--json" in help_text and a.output in help_text
    # The bundled analyses have a table of their own in each format (a new one shows its text
    # under its title until it gets one: docs/extending.md, *An analysis*).
    bundled = {"calibrate", "invariance", "agree", "self-preference"}
    assert bundled <= set(HTML_SECTIONS) and bundled <= set(MARKDOWN_SECTIONS)
    from babelrun.store import rundir

    assert not hasattr(rundir, "ANALYSES")  # the registry is the one list
    # The command line is built in the CLI layer from each entry's Argument data.
    assert not [m.name for m in Path(registry.__file__).parent.glob("*.py") if "import argparse" in m.read_text()]


class _Count(msgspec.Struct, frozen=True):
    judges: int
    note: str


def _throwaway_module():
    module = types.ModuleType("throwaway_analysis")
    module.Count = _Count
    module.text = lambda r: f"{r.judges} judge(s) <b>{r.note}</b>\n"
    return module


def _compute(args):
    from babelrun.store.rundir import read_run_info

    return _Count(len(read_run_info(args["run_dir"]).manifest.judges), args["note"])


THROWAWAY = registry.Analysis(
    "throwaway", "throwaway.json", "throwaway_analysis", "Count", "Throwaway count",
    help="count the judges", description="A throwaway analysis: the judges of a run.",
    arguments=(registry.Argument("run_dir", Path), registry.Argument("--note")), compute=_compute)


def test_a_new_entry_reaches_the_cli_the_staleness_check_and_both_reports(tmp_path, monkeypatch, capsys):
    quiet_audit({"judges": [simulated("j"), simulated("k", default_accuracy=0.7)], "scoring": {"bootstrap": 0},
                 "corpus": {"sources": [{"kind": "bundled"}], "languages": ["en"], "references_per_language": 2}},
                folder=tmp_path)
    run_dir = tmp_path / "run"
    monkeypatch.setitem(sys.modules, "throwaway_analysis", _throwaway_module())
    monkeypatch.setattr(registry, "ANALYSES", (*registry.ANALYSES, THROWAWAY))

    assert "throwaway" in {c.name for c in cli.commands()}
    assert cli.main(["throwaway", str(run_dir), "--note", "hi", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"judges": 2, "note": "hi"}
    assert json.loads((run_dir / "throwaway.json").read_text()) == {"judges": 2, "note": "hi"}
    assert cli.main(["throwaway", str(run_dir), "--note", "hi"]) == 0
    assert capsys.readouterr().out == "2 judge(s) <b>hi</b>\n"

    assert "throwaway.json" in registry.outputs()
    assert report_data.gather_run(run_dir).stale == []
    _age(run_dir, "throwaway.json")
    gathered = report_data.gather_run(run_dir)
    assert gathered.stale == ["throwaway.json"] and gathered.analyses["throwaway"] == _Count(2, "hi")

    assert cli.main(["report", str(run_dir), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "report.md").read_text()
    page = (tmp_path / "out" / "report.html").read_text()
    assert "## Throwaway count (t)" in md and "    2 judge(s) <b>hi</b>" in md and "throwaway.json predates" in md
    assert "<h2>Throwaway count (t)</h2>" in page and "2 judge(s) &lt;b&gt;hi&lt;/b&gt;" in page
    assert "throwaway.json</code> predates" in page


def _family_pairs(path, n=300):
    rows = []
    for i in range(n):
        better, worse = ("beta", "alpha") if i % 2 else ("alpha", "beta")
        first = i % 3 == 0
        rows.append({"input": f"question {i}", "label": 1 if first else 2,
                     "output_1": f"a good answer {i}" if first else f"a poor one {i}",
                     "output_2": f"a poor one {i}" if first else f"a good answer {i}",
                     "family_1": better if first else worse, "family_2": worse if first else better})
    path.write_text(json.dumps(rows))


@pytest.fixture(scope="module")
def family_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("family")
    _family_pairs(tmp / "pairs.json")
    judges = [{**simulated("alpha-on", default_accuracy=0.8, self_preference=0.3), "family": "alpha"},
              {**simulated("beta-judge", default_accuracy=0.8), "family": "beta", "model": "beta"},
              {**simulated("plain", default_accuracy=0.8), "model": "other"}]
    quiet_audit({"judges": judges, "corpus": {"sources": [{"kind": "labelled_pairs", "path": "pairs.json"}]},
                 "scoring": {"bootstrap": 0}}, folder=tmp)
    return tmp / "run"


def test_self_preference_has_json_the_staleness_check_and_a_report_section(family_run, tmp_path, capsys):
    assert cli.main(["self-preference", str(family_run), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [c["judge"] for c in printed["cards"]] == ["alpha-on", "beta-judge"] and printed["skipped"] == ["plain"]
    assert json.loads((family_run / "self_preference.json").read_text()) == printed
    _age(family_run, "self_preference.json")
    assert cli.main(["report", str(family_run), "--out", str(tmp_path)]) == 0
    md = (tmp_path / "report.md").read_text()
    page = (tmp_path / "report.html").read_text()
    for text in (md, page):
        assert "Self-preference (t)" in text and "self_preference.json" in text and "predates" in text
        assert "alpha-on" in text and "length-neutral" in text and "Judges without a family: plain" in text
    section = md.split("## Self-preference (t)", 1)[1].split("\n## ", 1)[0]
    assert section.count("| alpha-on | alpha |") == 2  # all pairs and the length-neutral ones
    assert "|---|---|---|---|---|---|---:|---|---|" in section

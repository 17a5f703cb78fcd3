"""The exit-code table of docs/operations.md, cell by cell: every (command, code) it lists is produced here
by a real invocation of the CLI; every command of the command table (``cli.COMMANDS``) has a
row, and the codes each row lists are those its command declares (``Command.exit_codes``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from babelrun.app.cli import COMMANDS, main
from babelrun.testing import FakeJudgeServer
from helpers import ROOT, SHARED_DATA, env_without, quiet_audit, simulated, write_manifest

LLMBAR = SHARED_DATA / "llmbar"
UDHR = SHARED_DATA / "udhr"
CORPUS = {"sources": [{"kind": "bundled"}], "languages": ["en", "sw"], "references_per_language": 2}
# Cells run elsewhere (a real interrupt needs a subprocess and a signal).
ELSEWHERE = {("audit", 130): "tests/e2e/test_resume.py::test_ctrl_c_drains_flushes_and_says_how_to_resume",
             ("check", 1): "tests/e2e/test_pin.py::test_check_passes_an_unchanged_judge_and_fails_a_drifted_one",
             ("self-preference", 0): "tests/e2e/test_selfpref.py::test_the_command_writes_the_cards"}


def readme_table() -> dict[tuple[str, int], str]:
    text = (ROOT / "docs" / "operations.md").read_text()  # the table moved from the README to the docs
    table = text.split("\n## Exit codes", 1)[1].split("\n\n")[2]
    lines = [line for line in table.splitlines() if line.startswith("| `")]
    codes = [0, 1, 2, 3, 130]
    cells = {}
    for line in lines:
        parts = [p.strip() for p in line.strip("|").split(" | ")]
        command = parts[0].strip("`")
        for code, what in zip(codes, parts[1:], strict=True):
            if what != "–":
                cells[(command, code)] = what
    return cells


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two finished runs of the same items: A, and B with a judge much worse in Swahili."""
    root = tmp_path_factory.mktemp("exit")
    out = {}
    for name, sw in (("a", 0.95), ("b", 0.2)):
        folder = root / name
        folder.mkdir()
        path = write_manifest(folder, [simulated("j", default_accuracy=0.95, accuracy={"sw": sw}),
                                       simulated("k", default_accuracy=0.8)],
                              corpus={**CORPUS, "references_per_language": 6}, scoring={"bootstrap": 20})
        assert quiet_audit(path).exit_code == 0
        out[name] = folder / "run"
        out[f"{name}_manifest"] = path
    out["not_run"] = root / "empty"
    out["not_run"].mkdir()
    one = root / "one"
    one.mkdir()
    path = write_manifest(one, [simulated("solo")], corpus=CORPUS, scoring={"bootstrap": 0})
    assert quiet_audit(path).exit_code == 0
    out["one_judge"] = one / "run"
    broken = root / "broken"
    broken.mkdir()
    out["broken_manifest"] = write_manifest(broken, [simulated("broken", invalid_rate=1.0)], corpus=CORPUS,
                                            scoring={"bootstrap": 0})
    out["broken"] = broken / "run"
    bad = root / "bad.yaml"
    bad.write_text("name: x\njudges: [{name: j, backend: simulated, concurrency: zero}]\n")
    out["bad_manifest"] = bad
    return out


def _merge_missing(tmp_path) -> int:
    path = write_manifest(tmp_path, [simulated("s")], corpus=CORPUS, scoring={"bootstrap": 0})
    assert main(["audit", str(path), "--shard", "0/2"]) == 0
    return main(["merge", str(tmp_path / "run")])


def _audit_fails(tmp_path) -> int:
    with FakeJudgeServer(faults=[401]) as server:
        judge = {"name": "o", "backend": "openai", "model": "m", "endpoint": server.url}
        return main(["audit", str(write_manifest(tmp_path, [judge], corpus=CORPUS))])


def _labels(tmp_path, runs) -> str:
    path = tmp_path / "labels.csv"
    path.write_text("item,label\nnothing,1\n")
    return str(path)


def _needs(folder):
    if not folder.exists():
        pytest.skip(f"shared data absent: {folder}")


def _agree_run(tmp_path):
    _needs(LLMBAR)
    path = write_manifest(tmp_path, [simulated("lb", default_accuracy=0.55)], scoring={"bootstrap": 0}, corpus={
        "sources": [{"kind": "labelled_pairs", "path": str(LLMBAR / "LLMBar_Natural"), "pairs_per_set": 12}]})
    assert quiet_audit(path).exit_code == 0
    return str(tmp_path / "run")


def _invariance_run(tmp_path):
    _needs(UDHR / "declaration")
    path = write_manifest(tmp_path, [simulated("u")], scoring={"bootstrap": 0}, corpus={
        "sources": [{"kind": "udhr", "path": str(UDHR)}], "languages": ["en", "fr"], "references_per_language": 31},
        perturbations=[{"name": "truncate", "severities": [0.5]}])  # every unit: both languages share them
    assert quiet_audit(path).exit_code == 0
    return str(tmp_path / "run")


CASES = {
    ("audit", 0): lambda r, t: main(["audit", str(r["a_manifest"])]),
    ("audit", 1): lambda r, t: _audit_fails(t),
    ("audit", 2): lambda r, t: main(["audit", str(r["bad_manifest"])]),
    ("audit", 3): lambda r, t: main(["audit", str(r["broken_manifest"])]),
    ("score", 3): lambda r, t: main(["audit", str(r["broken_manifest"])]) and main(["score", str(r["broken"])]),
    ("merge", 3): lambda r, t: main(["audit", str(r["broken_manifest"])]) and main(["merge", str(r["broken"])]),
    ("validate", 0): lambda r, t: main(["validate", str(r["a_manifest"])]),
    ("validate", 2): lambda r, t: main(["validate", str(r["bad_manifest"])]),
    ("score", 0): lambda r, t: main(["score", str(r["a"])]),
    ("score", 2): lambda r, t: main(["score", str(r["not_run"])]),
    ("report", 0): lambda r, t: main(["report", str(r["a"]), "--no-html", "--out", str(t)]),
    ("report", 2): lambda r, t: main(["report", str(r["a"]), str(r["b"])]),
    ("compact", 0): lambda r, t: main(["compact", str(r["a"])]),
    ("compact", 2): lambda r, t: main(["compact", str(r["not_run"])]),
    ("merge", 0): lambda r, t: main(["merge", str(r["a"])]),
    ("merge", 1): lambda r, t: _merge_missing(t),
    ("merge", 2): lambda r, t: main(["merge", str(r["not_run"])]),
    ("languages", 0): lambda r, t: main(["languages", str(r["a_manifest"])]),
    ("languages", 2): lambda r, t: main(["languages", str(r["bad_manifest"])]),
    ("invariance", 0): lambda r, t: main(["invariance", _invariance_run(t), "--json"]),
    ("invariance", 2): lambda r, t: main(["invariance", str(r["a"])]),  # bundled: not parallel
    ("calibrate", 0): lambda r, t: main(["calibrate", str(r["a"]), "--replicates", "10", "--json"]),
    ("calibrate", 2): lambda r, t: main(["calibrate", str(r["one_judge"])]),
    ("agree", 0): lambda r, t: main(["agree", _agree_run(t), str(LLMBAR / "LLMBar_Natural"), "--json"]),
    ("agree", 1): lambda r, t: main(["agree", _agree_run(t), str(LLMBAR / "LLMBar_Natural"), "--min-kappa", "0.99"]),
    ("agree", 2): lambda r, t: main(["agree", str(r["a"]), _labels(t, r)]),
    ("diff", 0): lambda r, t: main(["diff", str(r["a"]), str(r["a"]), "--fail-if-worse", "--json"]),
    ("diff", 1): lambda r, t: main(["diff", str(r["a"]), str(r["b"]), "--fail-if-worse"]),
    ("diff", 2): lambda r, t: main(["diff", str(r["a"]), str(r["not_run"])]),
    ("bench-judge", 0): lambda r, t: main(["bench-judge", str(r["a_manifest"]), "--sample", "4", "--seconds", "0.1",
                                           "--max-concurrency", "2", "--judge", "j", "--json"]),
    ("bench-judge", 2): lambda r, t: main(["bench-judge", str(r["a_manifest"]), "--judge", "nobody"]),
    ("show", 0): lambda r, t: main(["show", str(r["a"]), _an_item(r["a"])]),
    ("show", 2): lambda r, t: main(["show", str(r["a"]), "no-such-item"]),
    ("export", 0): lambda r, t: main(["export", str(r["a"]), "--out", str(t)]),
    ("export", 2): lambda r, t: main(["export", str(r["not_run"])]),
    ("pin", 0): lambda r, t: main(["pin", str(r["a"]), "--out", str(t / "lock.json")]),
    ("pin", 2): lambda r, t: main(["pin", str(r["not_run"])]),
    ("check", 0): lambda r, t: main(["pin", str(r["a"]), "--out", str(t / "lock.json")])
    or main(["check", str(t / "lock.json"), "--manifest", str(r["a_manifest"])]),
    ("check", 2): lambda r, t: main(["check", str(t / "no-such.lock.json")]),
    ("self-preference", 2): lambda r, t: main(["self-preference", str(r["a"])]),  # no judge declares a family
    ("cache", 0): lambda r, t: main(["cache", "stats", str(t)]),
    ("cache", 2): lambda r, t: main(["cache", "prune", str(t / "no-such-cache")]),
    ("data", 0): lambda r, t: main(["data", "list"]),
    ("data", 2): lambda r, t: main(["data", "get", "no-such-data-set"]),
}


def _an_item(run_dir) -> str:
    import babelrun

    return babelrun.load_run(run_dir, ["item_id"])["item_id"][0].as_py()


def test_the_table_covers_every_command_and_every_cell_has_a_case():
    table = readme_table()
    assert {c for c, _ in table} == {c.name for c in COMMANDS}
    assert set(table) == set(CASES) | set(ELSEWHERE)


def test_the_table_lists_the_codes_each_command_declares():
    table = readme_table()
    assert {c.name: set(c.exit_codes) for c in COMMANDS} == {
        c.name: {code for name, code in table if name == c.name} for c in COMMANDS}


@pytest.mark.parametrize("cell", sorted(CASES), ids=lambda c: f"{c[0]}-{c[1]}")
def test_exit_code(cell, runs, tmp_path, capsys):
    assert CASES[cell](runs, tmp_path) == cell[1]
    if cell[1] == 2:
        err = capsys.readouterr().err
        assert err.startswith("babelrun: error: ") and err.count("\n") == 1  # one line
    if cell[1] == 3:
        err = capsys.readouterr().err
        assert "misconfigured: broken: 100% of replies did not match the verdict pattern" in err


_PROGRAM = """import atexit, sys
from pathlib import Path
marker = Path(sys.argv[1])
atexit.register(lambda: marker.write_text("ran"))
sys.argv = ["babelrun", *sys.argv[2:]]
from babelrun.app.cli import run
run()
"""


@pytest.mark.parametrize("args, code", [(["languages", str(ROOT / "examples" / "quickstart.yaml")], 0),
                                        (["validate", "no-such-manifest.yaml"], 2)])
def test_the_program_leaves_with_the_code_the_output_and_the_exit_handlers(args, code, tmp_path, capsys):
    """The `babelrun` program (``cli.run``) leaves without the interpreter's teardown: the
    command's exit code, all it printed, and the exit handlers run first."""
    marker = tmp_path / "exit-handler"
    done = subprocess.run([sys.executable, "-c", _PROGRAM, str(marker), *args], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120, env=env_without("PYTHONUNBUFFERED"))  # output held in buffers
    assert main(args) == code
    here = capsys.readouterr()
    assert (done.returncode, done.stdout, done.stderr) == (code, here.out, here.err)
    assert marker.read_text() == "ran"

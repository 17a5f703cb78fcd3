"""The analysis commands end to end through the CLI: agree, diff, calibrate."""

import io

import pytest

import babelrun
from babelrun.app import audit as run
from babelrun.app.cli import main
from babelrun.engine.progress import Progress
from helpers import SHARED_DATA, simulated, write_manifest

LLMBAR = SHARED_DATA / "llmbar"


def _audit(folder, judges, corpus):
    folder.mkdir(parents=True, exist_ok=True)
    path = write_manifest(folder, judges, corpus=corpus, scoring={"bootstrap": 50})
    run.audit(babelrun.load_manifest(path), handle_signals=False, progress=Progress(stream=io.StringIO(), interval=60))
    return folder / "run"


@pytest.mark.skipif(not LLMBAR.exists(), reason="shared LLMBar data absent")
def test_agree_with_a_single_set_folder(tmp_path, capsys):
    run_dir = _audit(tmp_path, [simulated()], {"sources": [
        {"kind": "labelled_pairs", "path": str(LLMBAR / "LLMBar_Natural"), "pairs_per_set": 12}]})
    assert main(["agree", str(run_dir), str(LLMBAR / "LLMBar_Natural")]) == 0
    out = capsys.readouterr().out
    assert "matched to judged pairs: 12" in out and "n 12, both orders" in out and "κ" in out


def test_diff_and_calibrate(tmp_path, capsys):
    corpus = {"languages": ["en", "sw", "hi"], "references_per_language": 6}
    a = _audit(tmp_path / "a", [simulated("j", default_accuracy=0.9)], corpus)
    b = _audit(tmp_path / "b", [simulated("j", default_accuracy=0.9, accuracy={"sw": 0.4})], corpus)
    assert main(["diff", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "sw Swahili" in out and "McNemar" in out
    other = _audit(tmp_path / "c", [simulated("k", default_accuracy=0.8)], corpus)
    assert main(["calibrate", str(b), str(other), "--replicates", "20"]) == 0
    out = capsys.readouterr().out
    assert "Interaction" in out and "| sw" in out or " sw " in out
    assert main(["calibrate", str(b)]) == 2  # one judge: nothing to calibrate against (bad input)
    assert "judge" in capsys.readouterr().err

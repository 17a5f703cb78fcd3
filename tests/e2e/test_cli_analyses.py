"""The analysis commands end to end through the CLI: agree, diff, calibrate."""


import pytest

from babelrun.app.cli import main
from helpers import SHARED_DATA, quiet_audit, simulated

LLMBAR = SHARED_DATA / "llmbar"
SCORING = {"bootstrap": 50}


@pytest.mark.skipif(not LLMBAR.exists(), reason="shared LLMBar data absent")
def test_agree_with_a_single_set_folder(tmp_path, capsys):
    corpus = {"sources": [{"kind": "labelled_pairs", "path": str(LLMBAR / "LLMBar_Natural"), "pairs_per_set": 12}]}
    quiet_audit({"judges": [simulated()], "corpus": corpus, "scoring": SCORING}, folder=tmp_path)
    run_dir = tmp_path / "run"
    assert main(["agree", str(run_dir), str(LLMBAR / "LLMBar_Natural")]) == 0
    out = capsys.readouterr().out
    assert "matched to judged pairs: 12" in out and "n 12, both orders" in out and "κ" in out


def test_diff_and_calibrate(tmp_path, capsys):
    corpus = {"languages": ["en", "sw", "hi"], "references_per_language": 6}
    quiet_audit({"judges": [simulated("j", default_accuracy=0.9)], "corpus": corpus, "scoring": SCORING},
                folder=tmp_path / "a")
    quiet_audit({"judges": [simulated("j", default_accuracy=0.9, accuracy={"sw": 0.4})], "corpus": corpus,
                 "scoring": SCORING}, folder=tmp_path / "b")
    a, b = tmp_path / "a" / "run", tmp_path / "b" / "run"
    assert main(["diff", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "sw Swahili" in out and "McNemar" in out
    quiet_audit({"judges": [simulated("k", default_accuracy=0.8)], "corpus": corpus, "scoring": SCORING},
                folder=tmp_path / "c")
    other = tmp_path / "c" / "run"
    assert main(["calibrate", str(b), str(other), "--replicates", "20"]) == 0
    out = capsys.readouterr().out
    assert "Interaction" in out and "| sw" in out or " sw " in out
    assert main(["calibrate", str(b)]) == 2  # one judge: nothing to calibrate against (bad input)
    assert "judge" in capsys.readouterr().err

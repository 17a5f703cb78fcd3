"""``babelrun calibrate`` on whole simulated audits: it finds the language where a judge is worse,
and refuses a single judge or a non-run directory. (The statistics are unit/test_calibrate.py.)"""

from pathlib import Path

import msgspec
import numpy as np
import pytest

from babelrun.analyses import calibrate
from babelrun.errors import UserError
from helpers import quiet_audit, simulated

CORPUS = {"sources": [{"kind": "bundled"}], "languages": ["en", "hi", "sw", "zh"], "references_per_language": 10}


def _run_dir(folder, judge) -> Path:
    """The run directory of ``judge`` audited on four languages, ten references each."""
    manifest = {"judges": [judge], "corpus": CORPUS, "scoring": {"bootstrap": 0}}
    return Path(quiet_audit(manifest, folder=folder, expect_exit=0).run_dir)


def test_end_to_end_finds_the_language_where_a_judge_is_worse(tmp_path):
    steady = _run_dir(tmp_path / "a", simulated("steady", default_accuracy=0.75))
    # Better than "steady" everywhere but Swahili, where it is much worse.
    # (A large gap, so that the fixed seeds cannot make it borderline: judge ids, and with
    # them the simulated draws, change whenever a verdict-relevant setting is added.)
    uneven = _run_dir(tmp_path / "b", simulated("uneven", default_accuracy=0.95, accuracy={"sw": 0.3}))
    cal = calibrate.run([steady, uneven, steady], replicates=100)  # a repeated run counts once
    assert cal.judges == ["steady", "uneven"] and cal.langs == ["en", "hi", "sw", "zh"]
    assert len(cal.tasks) == 5 and cal.cells == 20 and cal.dropped == []
    inter = np.asarray(cal.interaction)
    sw = cal.langs.index("sw")
    # Uneven's Swahili bias is negative (steady's the mirror image), and by far the largest.
    assert inter[1, sw] < -3 * cal.interaction_se
    assert inter[0, sw] == pytest.approx(-inter[1, sw])
    assert np.argmax(np.abs(inter[1])) == sw
    # Raw: steady wins only in Swahili; calibrated: uneven (better overall) everywhere.
    assert [r[sw] for r in cal.ranks_raw] == [1, 2]
    assert cal.ranks_calibrated == [[2] * 4, [1] * 4]
    assert [(r.lang, r.better, r.worse) for r in cal.reversals] == [("sw", "uneven", "steady")]
    assert len(cal.judge_ids) == 2 and cal.judge_ids[0] != cal.judge_ids[1]
    # Serialisable, and the report names what it found.
    assert msgspec.json.decode(msgspec.json.encode(cal), type=calibrate.Calibration) == cal
    report = calibrate.text(cal)
    assert "| sw | uneven | steady |" in report and "## Cross-language rank agreement" in report


def test_run_refuses_a_single_judge_and_a_non_run_directory(tmp_path):
    one = _run_dir(tmp_path / "a", simulated("only"))
    with pytest.raises(UserError, match="only"):
        calibrate.run([one])
    with pytest.raises(UserError, match="not a babelrun run directory"):
        calibrate.run([tmp_path])

"""An audit of all 45 UDHR languages with the simulated judge (the corpus itself is
unit/test_udhr.py)."""

from __future__ import annotations

import pytest

from helpers import SHARED_DATA, quiet_audit, write_manifest

UDHR = SHARED_DATA / "udhr"
needs_udhr = pytest.mark.skipif(not (UDHR / "declaration").is_dir(),
                                reason=f"UDHR data not found in {UDHR}")


@needs_udhr
def test_audit_of_all_45_languages_with_the_simulated_judge(tmp_path):
    path = write_manifest(tmp_path, [{"name": "sim", "backend": "simulated",
                                      "simulated": {"default_accuracy": 0.9, "position_bias": 0.1}}],
                          corpus={"sources": [{"kind": "udhr", "path": str(UDHR)}], "references_per_language": 31},
                          scoring={"bootstrap": 50})
    result = quiet_audit(path)
    assert result.exit_code == 0
    (judge,) = result.cards.judges
    assert len(judge.languages) == 45
    assert all(lc.card.items > 0 and lc.perturbations for lc in judge.languages)
    report = (tmp_path / "run" / "report.md").read_text()
    assert "## Perturbation audit" in report
    assert report.count("(Yoruba)") >= 1 and "| fa (Persian)" in report and "| zh (Chinese)" in report

"""Early stopping on a many-language panel: the 45 UDHR languages, ~30 references
each, 4 simulated judges, every cell clearly above or below the deployment R."""

from __future__ import annotations

import msgspec
import pytest

from helpers import SHARED_DATA, quiet_audit, simulated

UDHR = SHARED_DATA / "udhr"
needs_udhr = pytest.mark.skipif(not (UDHR / "declaration").is_dir(), reason=f"UDHR data not found in {UDHR}")

JUDGES = [simulated("good", default_accuracy=0.98), simulated("fair", default_accuracy=0.97, position_bias=0.02),
          simulated("weak", default_accuracy=0.4), simulated("bad", default_accuracy=0.3)]
PERTURBATIONS = [{"name": n} for n in ("truncate", "shuffle", "repeat_pad")]
STOPPING = {"on": "verdict", "confidence": 0.95, "min_items": 30}


def _panel(**fields) -> dict:
    """The manifest: the four judges on every UDHR language, 30 references each; ``fields`` added."""
    corpus = {"sources": [{"kind": "udhr", "path": str(UDHR)}], "references_per_language": 30}
    return {"judges": JUDGES, "corpus": corpus, "scoring": {"bootstrap": 200}, **fields}


@needs_udhr
def test_stopping_saves_calls_and_keeps_every_clear_verdict(tmp_path):
    from babelrun.engine import stopping

    (tmp_path / "full").mkdir()
    (tmp_path / "stop").mkdir()
    full = quiet_audit(_panel(), folder=tmp_path / "full")
    stop = quiet_audit(_panel(stopping=STOPPING), folder=tmp_path / "stop")
    calls_full = sum(j.calls for j in full.stats.judges)
    calls_stop = sum(j.calls for j in stop.stats.judges)
    ratio = calls_stop / calls_full
    report = stopping.read_report(tmp_path / "stop" / "run")
    assert report is not None
    cells = {(j.judge, c.cell): c for j in report.judges for c in j.cells}
    clear = agree = 0
    for jc in full.cards.judges:
        for lc in jc.languages:
            r = lc.card.reliability
            if r.lo is None or (r.lo < 0.65 <= r.hi):
                continue
            clear += 1
            cell = cells[(jc.judge, lc.lang)]
            full_above = r.lo >= 0.65
            if cell.stopped_at is not None:
                agree += (cell.lo >= 0.65) == full_above
            else:  # not stopped: judged in full, the same verdict as the full run
                stopped_card = next(c for j in stop.cards.judges if j.judge == jc.judge
                                    for c in j.languages if c.lang == lc.lang)
                agree += (stopped_card.card.reliability.lo >= 0.65) == full_above
    print({j.judge: j.calls for j in stop.stats.judges}, {j.judge: j.calls for j in full.stats.judges})
    print(f"calls with stopping {calls_stop} / without {calls_full} = {ratio:.3f}; "
          f"clear cells {clear}, same verdict {agree}")
    assert ratio <= 0.6
    assert clear >= 150 and agree == clear
    # the cards say where they stopped
    stopped_cards = [lc.card for jc in stop.cards.judges for lc in jc.languages if lc.card.stopped]
    assert stopped_cards and all(c.stopped.startswith("stopped at n = ") for c in stopped_cards)
    # the skipped keys are recorded as not needed, and a rerun with stopping judges none of them
    assert sum(c.not_needed for c in cells.values()) > 0
    again = quiet_audit(_panel(stopping=STOPPING), folder=tmp_path / "stop")
    assert sum(j.calls for j in again.stats.judges) == 0
    # a later run without stopping judges them
    rest = quiet_audit(_panel(), folder=tmp_path / "stop")
    assert sum(j.ok for j in rest.stats.judges) == calls_full - calls_stop
    raw = msgspec.json.decode((tmp_path / "stop" / "run" / "stopping.json").read_bytes())
    assert raw["on"] == "verdict"

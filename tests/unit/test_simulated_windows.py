"""The simulated judge's knobs are windows of one draw, each only where it applies: a pair of
equal lengths is not in the verbosity window, and no item outside the probe family is in a
probe's. (A merge once sent every equal-length pair in the verbosity window to the perturbed
answer; the bundled examples' cards moved and no test noticed.)"""

from __future__ import annotations

import anyio

from babelrun.core.items import Item
from babelrun.judges import build, judge_spec
from babelrun.spec import ProbeKnobs, SimulatedKnobs
from helpers import request


def _verdicts(knobs: SimulatedKnobs, reference: str, perturbed: str, n: int = 200) -> set[str]:
    judge = build(judge_spec(name="s", backend="simulated", simulated=knobs), 0)
    out = set()
    for i in range(n):
        item = Item(f"{i:016x}", "text", "en", "r", "Q?", reference, perturbed, "shuffle", 0.5,
                    len(reference), len(perturbed))
        reply = anyio.run(judge.judge, request(item, "ref_first"))
        out.add(judge.protocol.read(reply)[0])
    return out


def test_equal_lengths_fall_through_the_verbosity_window_to_accuracy():
    knobs = SimulatedKnobs(default_accuracy=1.0, verbosity_bias=1.0, invalid_rate=0.0, tie_rate=0.0)
    assert _verdicts(knobs, "One. Two.", "Two. One.") == {"A"}  # same length: always the reference


def test_probe_knobs_do_not_touch_other_items():
    knobs = SimulatedKnobs(default_accuracy=1.0, invalid_rate=0.0, tie_rate=0.0,
                           probes=ProbeKnobs(authority=0.9, injection=0.9, master_key=0.9))
    assert _verdicts(knobs, "One. Two.", "Two. One.") == {"A"}

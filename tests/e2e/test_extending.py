"""The recipes of docs/extending.md, followed once: a throwaway perturbation and a throwaway
backend in a temporary package, each one function or class plus its one registry line, then
an audit that uses both. If a recipe needs a second edit somewhere, this test is where it
shows."""

from __future__ import annotations

import json
import textwrap

import babelrun
from babelrun import judges, perturb
from babelrun.judges import Capabilities
from helpers import quiet_audit, write_manifest

PERTURBATION = '''
from random import Random

from babelrun.perturb import script


def swap_halves(text: str, severity: float, rng: Random, lang: str) -> str:
    """The second half of the answer's sentences first: a reordering a judge should catch."""
    sentences = [s.text for s in script.sentences(text) if script.is_whole(s.text)]
    if len(sentences) < 2:
        return text
    half = len(sentences) // 2
    return " ".join(sentences[half:] + sentences[:half])
'''

BACKEND = '''
from babelrun.judges.base import JudgeReply, JudgeRequest


class LongerJudge:
    """Prefers the longer answer: a planted verbosity bias the cards must show."""

    def __init__(self, spec, judge_id: str, seed: int):
        self.spec, self.judge_id = spec, judge_id

    async def judge(self, request: JudgeRequest) -> JudgeReply:
        a, b = len(request.answer_a), len(request.answer_b)
        return JudgeReply(raw="A" if a > b else "B" if b > a else "tie", served_model="longer")

    async def aclose(self) -> None:
        pass
'''


def test_a_throwaway_perturbation_and_backend_audit_end_to_end(tmp_path, monkeypatch):
    package = tmp_path / "pkg" / "extpkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(PERTURBATION))
    (package / "longer.py").write_text(textwrap.dedent(BACKEND))
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))
    # Both registrations end with the test (monkeypatch deletes the keys it first set).
    monkeypatch.setitem(judges.BACKENDS, "longer", None)
    monkeypatch.setitem(perturb.TEXT_PERTURBATIONS, "swap_halves", None)
    import extpkg

    # The recipes' registry lines, as the page gives them.
    perturb.TEXT_PERTURBATIONS["swap_halves"] = perturb.Perturbation(extpkg.swap_halves)
    judges.register("longer", "extpkg.longer", "LongerJudge", Capabilities(in_process=True))

    path = write_manifest(tmp_path, [{"name": "longer", "backend": "longer"}],
                          corpus={"sources": [{"kind": "bundled"}], "languages": ["en", "es"],
                                  "references_per_language": 4},
                          perturbations=[{"name": "swap_halves", "severities": [1.0]},
                                         {"name": "repeat_pad", "severities": [0.5]}],
                          scoring={"bootstrap": 0})
    quiet_audit(path)
    table = babelrun.load_run(tmp_path / "run", ["judge", "perturbation", "verdict"]).to_pylist()
    verdicts = {(r["perturbation"], r["verdict"]) for r in table}
    # Padding lengthens: the length-only
    # judge prefers the degraded answer every time.
    assert {p for p, _ in verdicts} == {"swap_halves", "repeat_pad"}
    assert {v for p, v in verdicts if p == "repeat_pad"} == {"perturbed"}
    cards = json.loads((tmp_path / "run" / "cards.json").read_text())
    assert [j["judge"] for j in cards["judges"]] == ["longer"]

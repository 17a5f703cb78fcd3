"""A judge with explicit, known biases: for tests, benchmarks and the offline demo.

Deterministic per (seed, judge, item, order, sample): each of a judge's ``samples: k`` asks of a
presentation draws afresh (sample 0 draws what a judge asked once always drew), so its samples
agree as often as its knobs say (two samples of an accuracy-a judge with no other knob agree
with probability a² + (1 − a)²). Per reply: with ``invalid_rate`` an off-format
sentence, else with ``tie_rate`` ``tie``, else a decisive choice — slot A with probability
``|position_bias|`` (slot B when negative), else the longer answer with probability
``verbosity_bias``, else the reference with probability ``accuracy[lang]`` (the perturbed
answer otherwise), or ``accuracy_by_perturbation[perturbation]`` where the item's
perturbation (``agent:hallucinated_tool``, or its bare name ``hallucinated_tool``) is listed.
With ``self_preference`` s, after the position and verbosity draws and before accuracy, the
answer written by the judge's own ``family`` is named with probability s (only where exactly
one answer is its family's). With ``probes`` (``ProbeKnobs``), after the verbosity draw, a
robustness probe's cued answer (a master key's non-answer) is named with its probe's
probability c; so on cue probes ``cue_success`` estimates c + (1 − c)(1 − a) and ``cue_effect``
c·a (a: the accuracy), and on master keys accuracy estimates (1 − c)·a. ``script_bias`` b
works the same way where one answer is in Latin script and the other is not (the
``romanised`` probe): the non-Latin answer is named with probability b, so its cue effect
estimates b·a. Under this model
the card's Δ estimates ``position_bias`` and ``2v − 1``
estimates ``verbosity_bias`` (see docs/metrics.md).

With ``soft: true`` the judge gives probabilities instead (a model of a judge whose slot bias
is a constant shift of its log-odds, which is what position calibration can remove)::

    log P(A)/P(B) = ±μ + β + γ·sign(len A − len B) + ε,   ε ~ N(0, 1)

with +μ when the reference stands in slot A, μ = Φ⁻¹(accuracy) (so an unbiased judge picks
the reference with probability ``accuracy``), β = Φ⁻¹((1 + position_bias)/2) (a judge with
no quality signal names slot A with probability ½ + position_bias/2) and likewise γ from
``verbosity_bias``. P(tie) is ``tie_rate``; A and B share the rest. ``invalid_rate`` of the
replies carry no probabilities (an invalid soft verdict). With ``probes``, a probe's cued
answer (a master key) takes the judge in with its probe's probability c: then all of A's and
B's share goes to that answer's slot — so cue_success, cue_effect and master-key accuracy
estimate what they do for the hard judge (above), with a the judge's P(reference) otherwise.

With a ``verdict:`` pattern the judge writes its choice the way the template declares it: a
short explanation, then the verdict's ``reply`` format (or the one derived from its pattern)
with the label that maps to the chosen slot (a slot no label maps to, e.g. a tie under
alpaca_eval's ``m``/``M``, comes out off-format: invalid). The draws are the same as
without a pattern, so the same knobs make the same choices.

Pointwise (``protocol: pointwise``), per answer shown::

    score = round(s_ref − drop·[degraded] + g·log2(len answer / len reference) + o[lang] + ε)

(no drop for an answer identical to the reference: a robustness probe's self match)
clipped to the verdict's scale (with ``values:``, the label of the nearest value), ε ~
N(0, ``score_noise``), s_ref = ``score_reference``
(default: two thirds up the scale), drop = ``score_drop``, g = ``length_gain``, o =
``scale_offset`` (per language, 0 elsewhere); ``invalid_rate`` of the replies are off-format.
Under this model the pointwise card's scale offset of a language estimates o[lang] minus
the pooled mean of o, and its verbosity gain on ``repeat_pad`` items estimates
g·log2(len padded / len reference) − drop (before rounding and clipping).
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping
from statistics import NormalDist

import anyio
import msgspec

from ..agentic import AGENTIC_PERTURBATIONS
from ..core import languages
from ..core.items import bare_name
from ..errors import ManifestError
from ..perturb import TEXT_PERTURBATIONS, probes
from ..perturb.romanise import main_script
from ..spec import JudgeSpec, SimulatedKnobs
from .base import JudgeReply, JudgeRequest
from .labels import slot_labels
from .options import LocalOptions
from .prompt import parse
from .protocol import Judging, reply_format, verdict_of
from .registry import options_of

# Knobs added after judge ids were first published: left out of the identity while they hold
# their default, so adding a knob never renames existing judges.
_LATER_KNOBS: dict[str, object] = {"noise": None, "accuracy_by_perturbation": {}, "score_reference": None,
                                   "score_drop": 2.0, "score_noise": 1.0, "length_gain": 0.0, "scale_offset": {},
                                   "self_preference": 0.0, "probes": None, "script_bias": 0.0}


class SimulatedOptions(LocalOptions, frozen=True):
    """The simulated judge's options: its bias knobs (``simulated:``, the numbers the metrics
    must recover) and the in-process micro-batcher's (``LocalOptions``)."""

    simulated: SimulatedKnobs | None = None

    def identity(self) -> dict[str, object]:
        if self.simulated is None:
            return {}
        knobs = msgspec.structs.asdict(self.simulated)
        for name, default in _LATER_KNOBS.items():
            if knobs[name] == default:
                del knobs[name]
        return {"simulated": knobs}

_OFF_FORMAT = (
    "Both answers have merit, but it depends on the reader.",
    "I cannot decide without more context.",
    "Answer A is more detailed while Answer B is shorter.",
)
_EXPLAINED = (
    "Both responses address the question; I compared their correctness and completeness.",
    "Weighing accuracy, coherence and detail against the question:",
    "After comparing the answers carefully, my assessment follows.",
)


class SimulatedJudge:
    def __init__(self, spec: JudgeSpec, judge_id: str, seed: int):
        self.spec = spec
        self.judge_id = judge_id
        self.knobs = options_of(spec, SimulatedOptions).simulated or SimulatedKnobs()
        self.seed = seed
        self._accuracy = {_norm(k): v for k, v in self.knobs.accuracy.items()}
        self._offset = {_norm(k): v for k, v in self.knobs.scale_offset.items()}
        self._by_perturbation = self.knobs.accuracy_by_perturbation
        how = self.protocol = Judging.of(spec)
        self._pointwise = how.kind == "pointwise"
        self._format = reply_format(how.verdict) if how.verdict is not None else None
        pointwise = how.verdict if self._pointwise else None  # verdict_of: never None for pointwise
        self._scale = pointwise.scale if pointwise is not None else None
        self._values = pointwise.values if pointwise is not None else {}
        labels = (slot_labels(how.verdict) or {"A": "A", "B": "B", "tie": "tie"}) if how.verdict is not None else {}
        self._label: dict[str, str] = {}
        for label, slot in labels.items():
            self._label.setdefault(slot, label)

    def _rng(self, request: JudgeRequest) -> random.Random:
        source = self.knobs.noise if self.knobs.noise is not None else self.judge_id
        key = f"{self.seed}\x1f{source}\x1f{request.item.item_id}\x1f{request.order}"
        if request.sample:
            key += f"\x1f{request.sample}"
        return random.Random(hashlib.blake2b(key.encode(), digest_size=8).digest())

    def decide(self, request: JudgeRequest) -> str:
        k, rng = self.knobs, self._rng(request)
        u = rng.random()
        if u < k.invalid_rate:
            return rng.choice(_OFF_FORMAT)
        if u < k.invalid_rate + k.tie_rate:
            return "tie"
        ref_slot = "A" if request.order == "ref_first" else "B"
        pert_slot = "B" if ref_slot == "A" else "A"
        w = rng.random()
        len_a, len_b = len(request.answer_a), len(request.answer_b)
        cue, pulled = self.pull(request, pert_slot)  # draws nothing: the draws are as before without it
        if w < abs(k.position_bias):
            slot = "A" if k.position_bias > 0 else "B"
        elif w < abs(k.position_bias) + k.verbosity_bias and len_a != len_b:
            slot = "A" if len_a > len_b else "B"
        elif (cue
              and abs(k.position_bias) + k.verbosity_bias <= w < abs(k.position_bias) + k.verbosity_bias + cue):
            slot = pulled  # taken in by the probe's cue (or master key): the worse answer; or by the script
            # (its own window after the verbosity one: with no probe the draws are as before)
        elif w < abs(k.position_bias) + k.verbosity_bias + cue + k.self_preference and (own := self.own_slot(request)):
            slot = own
        else:
            slot = ref_slot if rng.random() < self.accuracy(request) else pert_slot
        # Vary the surface form the way real judges do; every form here is an accepted one.
        return rng.choice((slot, slot, slot, f"Answer: {slot}", f"**{slot}**"))

    def pull(self, request: JudgeRequest, pert_slot: str) -> tuple[float, str]:
        """What draws the judge away from quality on this item, and to which slot: a probe's
        cue (its knob, the worse answer), else ``script_bias`` towards the answer in a script
        other than Latin where the other answer is in Latin script; (0, "") otherwise."""
        cue = self.susceptibility(request)
        if cue or not self.knobs.script_bias:
            return cue, pert_slot
        a, b = main_script(request.answer_a), main_script(request.answer_b)
        if a != b and "LATIN" in (a, b) and "" not in (a, b):
            return self.knobs.script_bias, "B" if a == "LATIN" else "A"
        return 0.0, pert_slot

    def susceptibility(self, request: JudgeRequest) -> float:
        """The judge's knob for this item's robustness probe (0 for every other item, the
        probes' clean twins and the self match)."""
        if self.knobs.probes is None or request.item.kind != "probe":
            return 0.0
        probe = probes.probe_of(request.item.perturbation)
        return float(getattr(self.knobs.probes, probe, 0.0)) if probe in probes.PROBES else 0.0

    def own_slot(self, request: JudgeRequest) -> str | None:
        """The slot holding the one answer the judge's own family wrote, if exactly one did."""
        family, item = self.spec.family, request.item
        if not family or (item.ref_family == family) == (item.pert_family == family):
            return None
        ref_slot = "A" if request.order == "ref_first" else "B"
        return ref_slot if item.ref_family == family else ("B" if ref_slot == "A" else "A")

    def accuracy(self, request: JudgeRequest) -> float:
        """The item's perturbation's accuracy where listed, else its language's."""
        item = request.item
        for key in (item.perturbation, bare_name(item.perturbation)):
            if key in self._by_perturbation:
                return self._by_perturbation[key]
        lang = item.lang  # a regional tag (ha-NG) falls back to its language (ha)
        return self._accuracy.get(lang, self._accuracy.get(lang.split("-")[0], self.knobs.default_accuracy))

    def probabilities(self, request: JudgeRequest) -> tuple[float, float, float] | None:
        """The soft verdict P(A), P(B), P(tie) (module docstring), or None (invalid)."""
        k, rng = self.knobs, self._rng(request)
        if rng.random() < k.invalid_rate:
            return None
        cue, pulled = self.pull(request, "A" if request.order == "pert_first" else "B")
        if cue and rng.random() < cue:  # taken in by a probe's cue (a master key, the script): sure of it
            p_a = 1 - k.tie_rate if pulled == "A" else 0.0
            return (p_a, 1 - k.tie_rate - p_a, k.tie_rate)
        quality = _probit(self.accuracy(request))
        len_a, len_b = len(request.answer_a), len(request.answer_b)
        logit = (quality if request.order == "ref_first" else -quality) + _probit((1 + k.position_bias) / 2)
        if len_a != len_b:
            logit += _probit((1 + k.verbosity_bias) / 2) * (1 if len_a > len_b else -1)
        own = self.own_slot(request) if k.self_preference else None
        if own:
            logit += _probit((1 + k.self_preference) / 2) * (1 if own == "A" else -1)
        logit += rng.gauss(0.0, 1.0)
        p_a = (1 - k.tie_rate) / (1 + math.exp(-max(-700.0, min(700.0, logit))))
        return (p_a, 1 - k.tie_rate - p_a, k.tie_rate)

    def rate(self, request: JudgeRequest) -> str:
        """A pointwise reply: an explanation and the score, or off-format (module docstring)."""
        k, rng = self.knobs, self._rng(request)
        if rng.random() < k.invalid_rate:
            return rng.choice(_OFF_FORMAT)
        assert self._scale is not None  # rate() is for a pointwise judge, whose verdict has a scale
        lo, hi = self._scale
        score = lo + (hi - lo) * 2 / 3 if k.score_reference is None else k.score_reference
        # the drop is for a degraded answer: the same text as the reference (a probe's self
        # match; a degradation item never is, a no-op is never emitted) is scored like it
        if request.order == "degraded" and request.answer != request.item.reference:
            cue = self.susceptibility(request)
            if not (cue and rng.random() < cue):  # a cued answer the judge is taken in by scores as the reference
                score -= k.score_drop
        score += k.length_gain * math.log2(max(1, len(request.answer)) / max(1, len(request.item.reference)))
        lang = request.item.lang
        score += self._offset.get(lang, self._offset.get(lang.split("-")[0], 0.0))
        score += rng.gauss(0.0, k.score_noise)
        if self._values:  # graded labels: the one whose value is nearest
            return self._written(rng, min(self._values, key=lambda label: abs(self._values[label] - score)))
        value = min(hi, max(lo, round(score)))
        return self._written(rng, f"{value:g}")

    def _written(self, rng: random.Random, label: str) -> str:
        assert self._format is not None  # check() requires a reply format the pattern reads back
        return f"{rng.choice(_EXPLAINED)} {self._format.format(label=label)}"

    def _declared(self, raw: str, rng: random.Random) -> str:
        """A decided reply in the template's declared verdict format (module docstring)."""
        slot = parse(raw)
        if slot == "invalid" or slot not in self._label:
            return raw if slot == "invalid" else rng.choice(_OFF_FORMAT)
        return self._written(rng, self._label[slot])

    async def judge(self, request: JudgeRequest) -> JudgeReply:
        probs = None
        if self._pointwise:
            raw = self.rate(request)
        elif self.spec.soft:
            probs = self.probabilities(request)
            raw = _OFF_FORMAT[0] if probs is None else ("A", "B", "tie")[max(range(3), key=probs.__getitem__)]
        else:
            raw = self.decide(request)
            if self._format is not None:
                raw = self._declared(raw, self._rng(request))
        if self.knobs.latency_ms:
            await anyio.sleep(self.knobs.latency_ms / 1000)
        chars = sum(len(m["content"]) for m in request.messages)
        return JudgeReply(raw=raw, served_model="simulated", tokens_in=chars // 4,
                          tokens_out=1 if self._format is None else len(raw) // 4, probs=probs)

    async def aclose(self) -> None:
        pass


def _probit(p: float) -> float:
    """Φ⁻¹(p), kept finite at 0 and 1."""
    return NormalDist().inv_cdf(min(max(p, 1e-9), 1 - 1e-9))


def _norm(code: str) -> str:
    from ..core import languages

    return languages.normalize(code)


def check(spec: JudgeSpec, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """The manifest's check of a simulated judge: its knobs, and a reply format its verdict
    pattern reads back (it writes replies in the declared format)."""
    try:
        wrong = _knobs_problem(options_of(spec, SimulatedOptions).simulated or SimulatedKnobs())
    except ManifestError as e:  # a language code the registry does not know
        return f"simulated.{e.path}", e.problem
    if wrong is not None:
        return f"simulated{'.' if wrong[0] else ''}{wrong[0]}", wrong[1]
    verdict = verdict_of(spec)
    if verdict is not None and reply_format(verdict) is None:
        return "verdict.reply", (f"judge {spec.name!r}: the simulated judge cannot write a reply this pattern "
                                 "reads: give one, e.g. 'Verdict: [[{label}]]'")
    return None


def _knobs_problem(knobs: SimulatedKnobs) -> tuple[str, str] | None:
    if abs(knobs.position_bias) + knobs.verbosity_bias > 1.0:
        return "", "|position_bias| + verbosity_bias must not exceed 1"
    if abs(knobs.position_bias) + knobs.verbosity_bias + knobs.script_bias > 1.0:
        return "script_bias", "|position_bias| + verbosity_bias + script_bias must not exceed 1"
    if knobs.probes is not None:
        worst = max(msgspec.structs.astuple(knobs.probes))
        if abs(knobs.position_bias) + knobs.verbosity_bias + worst > 1.0:
            return "probes", "|position_bias| + verbosity_bias + a probe's susceptibility must not exceed 1"
    if knobs.invalid_rate + knobs.tie_rate > 1.0:
        return "", "invalid_rate + tie_rate must not exceed 1"
    for code in knobs.scale_offset:
        languages.checked(code, f"scale_offset.{code}")
    for code, value in knobs.accuracy.items():
        languages.checked(code, f"accuracy.{code}")
        if not 0.0 <= value <= 1.0:
            return f"accuracy.{code}", "expected a probability in [0, 1]"
    for name, value in knobs.accuracy_by_perturbation.items():
        bare = bare_name(name)
        if bare not in TEXT_PERTURBATIONS and bare not in AGENTIC_PERTURBATIONS:
            return f"accuracy_by_perturbation.{name}", f"unknown perturbation {name!r}"
        if not 0.0 <= value <= 1.0:
            return f"accuracy_by_perturbation.{name}", "expected a probability in [0, 1]"
    return None

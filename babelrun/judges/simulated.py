"""A judge with explicit, known biases: for tests, benchmarks and the offline demo.

Deterministic per (seed, judge, item, order). Per reply: with ``invalid_rate`` an off-format
sentence, else with ``tie_rate`` ``tie``, else a decisive choice — slot A with probability
``|position_bias|`` (slot B when negative), else the longer answer with probability
``verbosity_bias``, else the reference with probability ``accuracy[lang]`` (the perturbed
answer otherwise), or ``accuracy_by_perturbation[perturbation]`` where the item's
perturbation (``agent:hallucinated_tool``, or its bare name ``hallucinated_tool``) is listed. Under this model the card's Δ estimates ``position_bias`` and ``2v − 1``
estimates ``verbosity_bias`` (see the README's metric definitions).
"""

from __future__ import annotations

import hashlib
import random

import anyio

from ..manifest import JudgeSpec, SimulatedKnobs
from .base import JudgeReply, JudgeRequest

_OFF_FORMAT = (
    "Both answers have merit, but it depends on the reader.",
    "I cannot decide without more context.",
    "Answer A is more detailed while Answer B is shorter.",
)


class SimulatedJudge:
    def __init__(self, spec: JudgeSpec, judge_id: str, seed: int):
        self.spec = spec
        self.judge_id = judge_id
        self.knobs = spec.simulated or SimulatedKnobs()
        self.seed = seed
        self._accuracy = {_norm(k): v for k, v in self.knobs.accuracy.items()}
        self._by_perturbation = self.knobs.accuracy_by_perturbation

    def _rng(self, request: JudgeRequest) -> random.Random:
        key = f"{self.seed}\x1f{self.judge_id}\x1f{request.item.item_id}\x1f{request.order}"
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
        if w < abs(k.position_bias):
            slot = "A" if k.position_bias > 0 else "B"
        elif w < abs(k.position_bias) + k.verbosity_bias and len_a != len_b:
            slot = "A" if len_a > len_b else "B"
        else:
            slot = ref_slot if rng.random() < self._accuracy_for(request.item) else pert_slot
        # Vary the surface form the way real judges do; every form here is an accepted one.
        return rng.choice((slot, slot, slot, f"Answer: {slot}", f"**{slot}**"))

    def _accuracy_for(self, item) -> float:
        name = item.perturbation
        for key in (name, name.split(":", 1)[-1]):
            if key in self._by_perturbation:
                return self._by_perturbation[key]
        lang = item.lang  # a regional tag (ha-NG) falls back to its language (ha)
        return self._accuracy.get(lang, self._accuracy.get(lang.split("-")[0], self.knobs.default_accuracy))

    async def judge(self, request: JudgeRequest) -> JudgeReply:
        raw = self.decide(request)
        if self.knobs.latency_ms:
            await anyio.sleep(self.knobs.latency_ms / 1000)
        chars = sum(len(m["content"]) for m in request.messages)
        return JudgeReply(raw=raw, served_model="simulated", tokens_in=chars // 4, tokens_out=1)

    async def aclose(self) -> None:
        pass


def _norm(code: str) -> str:
    from .. import languages

    return languages.normalize(code)

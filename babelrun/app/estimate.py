"""``babelrun validate``'s estimate of what an audit will send: tokens per judge, and the cost
where the manifest gives a judge's ``price``.

Input tokens are counted the way the rate limiter counts them (``limits.estimate_tokens``:
the prompt's UTF-8 bytes / 3, a deliberate overestimate for most tokenizers and close for
scripts that spend a token per character); output tokens at each judge's ``max_tokens``, the
most it may reply. Every item is rendered once per (template, prompt language), not per judge.
"""

from __future__ import annotations

import math

import msgspec

from ..judges.base import JudgeRequest
from ..judges.prompt import TEMPLATES
from ..plan import Plan
from ..spec import Manifest


class Estimate(msgspec.Struct, frozen=True):
    judge: str
    calls: int  # presentations (an escalation-only judge: at most)
    tokens_in: int
    tokens_out: int
    cost: float | None  # None: no price in the manifest
    currency: str | None = None
    upper_bound: bool = False  # escalation-only judges: only escalated calls are made


def estimate(manifest: Manifest, plan: Plan) -> list[Estimate]:
    prompt_bytes: dict[tuple[str, str], int] = {}
    groups = {(j.prompt, j.prompt_language) for j in manifest.judges}
    for item in plan.items():
        for prompt, language in groups:
            messages = JudgeRequest.of(item, "ref_first", TEMPLATES[prompt], language == "item").messages
            size = sum(len(m["content"].encode()) for m in messages)  # both orders: the same bytes
            prompt_bytes[(prompt, language)] = prompt_bytes.get((prompt, language), 0) + 2 * size
    out = []
    for j in manifest.judges:
        calls = plan.calls_per_judge
        tokens_in = math.ceil(prompt_bytes.get((j.prompt, j.prompt_language), 0) / 3)
        tokens_out = calls * j.max_tokens
        cost = (None if j.price is None else
                round((tokens_in * j.price.input_per_mtok + tokens_out * j.price.output_per_mtok) / 1e6, 2))
        out.append(Estimate(j.name, calls, tokens_in, tokens_out, cost, j.price.currency if j.price else None,
                            j.calls == "escalations"))
    return out


def text(estimates: list[Estimate]) -> str:
    lines = []
    for e in estimates:
        bound = "at most " if e.upper_bound else ""
        cost = "" if e.cost is None else f", about {e.cost:,.2f} {e.currency}"
        lines.append(f"  {e.judge}: {bound}{e.calls} calls, ~{e.tokens_in:,} tokens in, ≤{e.tokens_out:,} "
                     f"tokens out{cost}")
    return "estimated (input: UTF-8 bytes / 3; output: max_tokens per call):\n" + "\n".join(lines) + "\n"

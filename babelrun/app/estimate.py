"""``babelrun validate``'s estimate of what an audit will send: tokens per judge, and the cost
where the manifest gives a judge's ``price``.

Input tokens are counted the way the rate limiter counts them (``limits.estimate_tokens``:
the prompt's UTF-8 bytes / 3, a deliberate overestimate for most tokenizers and close for
scripts that spend a token per character); output tokens at each judge's ``max_tokens``, the
most it may reply. Every item is rendered once per (template, prompt language, protocol), not per judge.
"""

from __future__ import annotations

import math

import msgspec

from ..judges.protocol import Judging, max_tokens
from ..plan import Plan
from ..spec import JudgeSpec, Manifest


class Estimate(msgspec.Struct, frozen=True):
    judge: str
    calls: int  # presentations (an escalation-only judge: at most)
    tokens_in: int
    tokens_out: int
    cost: float | None  # None: no price in the manifest
    currency: str | None = None
    upper_bound: bool = False  # escalation-only judges: only escalated calls are made


def estimate(manifest: Manifest, plan: Plan) -> list[Estimate]:
    # What a request says depends on the template, its language and the protocol only: render
    # each such group once, whatever the number of judges (models) sharing it.
    def group(spec: JudgeSpec) -> tuple[bytes, str, str]:
        return msgspec.json.encode(spec.prompt), spec.prompt_language, spec.protocol

    how = {group(spec): Judging.of(spec) for spec in manifest.judges}
    prompt_bytes = dict.fromkeys(how, 0)
    for item in plan.items():
        for g, protocol in how.items():
            for key in protocol.keys:  # both orders, or both answers (pointwise)
                messages = protocol.request(item, key).messages
                prompt_bytes[g] += sum(len(m["content"].encode()) for m in messages)
    out = []
    for j in manifest.judges:
        calls = plan.calls_per_judge
        tokens_in = math.ceil(prompt_bytes[group(j)] / 3)
        tokens_out = calls * max_tokens(j)
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

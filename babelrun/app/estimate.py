"""``babelrun validate``'s estimate of what an audit will send: tokens per judge, and the cost
where the manifest gives a judge's ``price``.

Input tokens are counted the way the rate limiter counts them (``limits.estimate_tokens``:
the prompt's UTF-8 bytes / 3, a deliberate overestimate for most tokenizers and close for
scripts that spend a token per character); output tokens at each judge's ``max_tokens``, the
most it may reply. Every item is rendered once per (template, prompt language, protocol), not per judge.

With ``stopping:`` (early stopping, docs/stopping.md) the counts are an upper bound for the judges it applies to
(pairwise, not a provider batch): a cell may stop after ``min_items`` items, which gives the
floor (``calls_at_least``). With ``cache:`` the requests the cache already holds for a judge
(the same key the engine looks up) are left out of its calls, tokens and cost, and counted
apart (``cached``). The cost prices cached input per the judge's ``price`` (or
``price_file``), and a batch judge's at its ``batch_discount``.
"""

from __future__ import annotations

import math

import msgspec

from ..judges.options import batch_of
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
    upper_bound: bool = False  # escalation-only judges, or stopping: fewer calls may be made
    cached: int = 0  # presentations the response cache already answers (not in calls)
    calls_at_least: int | None = None  # stopping: the calls if every cell stops at min_items


def _uses_cache(manifest: Manifest, spec: JudgeSpec) -> bool:
    """The engine's rule (``engine.pipeline``): temperature 0 unless the cache takes samples
    (provider batch judges too)."""
    cache = manifest.cache
    return cache is not None and (spec.temperature == 0 or cache.sampled)


def _stops(manifest: Manifest, spec: JudgeSpec) -> bool:
    return manifest.stopping is not None and spec.protocol == "pairwise"  # batch judges: between batches


def _floor(manifest: Manifest, plan: Plan, keys: int) -> int:
    """The fewest calls under stopping: every cell at ``min_items`` items, the rest in full."""
    assert manifest.stopping is not None
    cells = plan.stopping_cells(manifest.stopping.per_perturbation)
    in_cells = sum(len(ids) for ids in cells.values())
    least = sum(min(manifest.stopping.min_items, len(ids)) for ids in cells.values())
    return (plan.n_items - in_cells + least) * keys


def estimate(manifest: Manifest, plan: Plan) -> list[Estimate]:
    from ..engine.ledger import cost, price_of
    from ..judges import judge_id
    from ..store.cache import ResponseCache, request_key

    # What a request says depends on the template, its language and the protocol only: render
    # each such group once, whatever the number of judges (models) sharing it.
    def group(spec: JudgeSpec) -> tuple[bytes, str, str]:
        return msgspec.json.encode(spec.prompt), spec.prompt_language, spec.protocol

    how = {group(spec): Judging.of(spec) for spec in manifest.judges}
    prompt_bytes = dict.fromkeys(how, 0)
    store = None if manifest.cache is None else ResponseCache(manifest.cache.dir, manifest.cache.max_mb)
    # The judges that look up the cache, by group: (index, judge_id, sampling); their hits.
    looking: dict[tuple[bytes, str, str], list[tuple[int, str, tuple[float, int]]]] = {}
    for i, spec in enumerate(manifest.judges):
        if store is not None and _uses_cache(manifest, spec):
            looking.setdefault(group(spec), []).append((i, judge_id(spec), (spec.temperature, max_tokens(spec))))
    hits = [0] * len(manifest.judges)
    hit_bytes = [0] * len(manifest.judges)
    for item in plan.items():
        for g, protocol in how.items():
            for key in protocol.keys:  # both orders, or both answers (pointwise)
                request = protocol.request(item, key)
                size = sum(len(m["content"].encode()) for m in request.messages)
                prompt_bytes[g] += size
                for i, jid, sampling in looking.get(g, ()):
                    assert store is not None
                    if store.contains(jid, request_key(jid, request.messages, request.order, sampling)):
                        hits[i] += 1
                        hit_bytes[i] += size
    out = []
    for i, j in enumerate(manifest.judges):
        calls = plan.calls_per_judge * j.samples - hits[i]  # every sample a call (hits: of sample 0)
        tokens_in = math.ceil((prompt_bytes[group(j)] * j.samples - hit_bytes[i]) / 3)
        tokens_out = calls * max_tokens(j)
        price = price_of(j)
        usd = None if price is None else round(cost(price, tokens_in, 0, tokens_out, batch_of(j)), 2)
        stops = _stops(manifest, j)
        floor = None
        if stops:
            floor = max(0, min(calls, _floor(manifest, plan, len(how[group(j)].keys)) - hits[i]))
        out.append(Estimate(j.name, calls, tokens_in, tokens_out, usd, price.currency if price else None,
                            j.calls == "escalations" or stops, hits[i], floor))
    return out


def text(estimates: list[Estimate]) -> str:
    lines = []
    for e in estimates:
        bound = "at most " if e.upper_bound else ""
        cost = "" if e.cost is None else f", about {'at most ' if e.upper_bound else ''}{e.cost:,.2f} {e.currency}"
        floor = "" if e.calls_at_least is None else f" (stopping: at least {e.calls_at_least})"
        cached = f"; {e.cached} more from the response cache, free" if e.cached else ""
        lines.append(f"  {e.judge}: {bound}{e.calls} calls{floor}, ~{e.tokens_in:,} tokens in, ≤{e.tokens_out:,} "
                     f"tokens out{cost}{cached}")
    return "estimated (input: UTF-8 bytes / 3; output: max_tokens per call):\n" + "\n".join(lines) + "\n"

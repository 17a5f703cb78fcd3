"""``babelrun validate``'s estimate of what an audit will send: tokens per judge, and the cost
where the manifest gives a judge's ``price``.

Input tokens are expected at the prompt's UTF-8 bytes / 4 (about four characters a token in
Latin scripts, three quarters of a token per character in scripts of three-byte characters:
Devanagari, CJK), and bounded the way the rate limiter counts them (``limits.estimate_tokens``:
bytes / 3, a deliberate overestimate for most tokenizers). Output tokens are *expected* per call
(``expected_reply``): measured, the mean ``tokens_out`` of the judge's ok records already in
the run directory (a ``--limit`` trial run), when it has at least ``MEASURED_MIN`` of them;
else from the verdict format, ``ONE_WORD_REPLY`` tokens for a one-word verdict (the built-in
pairwise templates under the strict parser) and ``REASONING_REPLY`` for a template that
reasons before its verdict (capped at ``max_tokens``). Each judge's ``max_tokens`` gives the
bound beside it (``tokens_in_bound``, ``tokens_out_bound``, ``cost_bound``): what the rate
limiter reserves, and about the most the audit may spend.
Every item is rendered once per (template, prompt language, protocol), not per judge.

With ``stopping:`` (early stopping, docs/stopping.md) the counts are an upper bound for the judges it applies to
(pairwise, not a provider batch): a cell may stop after ``min_items`` items, which gives the
floor (``calls_at_least``). With ``cache:`` the requests the cache already holds for a judge
(the same key the engine looks up) are left out of its calls, tokens and cost, and counted
apart (``cached``). The cost prices cached input per the judge's ``price`` (or
``price_file``), and a batch judge's at its ``batch_discount``.
"""

from __future__ import annotations

import math
from pathlib import Path

import msgspec

from ..judges.options import batch_of
from ..judges.protocol import ONE_WORD_TOKENS, Judging, max_tokens
from ..plan import Plan
from ..spec import JudgeSpec, Manifest

# Expected reply lengths in tokens, where no trial run measured them: a one-word verdict is
# the label and an end token; a reasoning template's typical reply (a short paragraph and
# the verdict line) is a documented guess, docs/operations.md, *Budgets*.
ONE_WORD_REPLY = 2
REASONING_REPLY = 200
MEASURED_MIN = 10  # ok records with tokens_out before a trial run's mean replaces the guess


class Estimate(msgspec.Struct, frozen=True):
    judge: str
    calls: int  # presentations (an escalation-only judge: at most)
    tokens_in: int
    tokens_out: int  # expected (``expected_reply`` per call)
    cost: float | None  # expected; None: no price in the manifest
    currency: str | None = None
    upper_bound: bool = False  # escalation-only judges, or stopping: fewer calls may be made
    cached: int = 0  # presentations the response cache already answers (not in calls)
    calls_at_least: int | None = None  # stopping: the calls if every cell stops at min_items
    tokens_in_bound: int = 0  # input as the rate limiter counts it (bytes / 3)
    tokens_out_bound: int = 0  # every call at max_tokens
    cost_bound: float | None = None  # the cost with every call at max_tokens
    reply_source: str = ""  # where the expected reply length comes from


def expected_reply(spec: JudgeSpec, measured: tuple[float, int] | None = None) -> tuple[float, str]:
    """(tokens a reply is expected to take, where that comes from): a trial run's mean over
    its ``measured`` (mean, records) when there are ``MEASURED_MIN``; else the verdict format's."""
    bound = max_tokens(spec)
    if measured is not None and measured[1] >= MEASURED_MIN:
        return min(measured[0], bound), f"measured: mean of {measured[1]} replies in the run directory"
    one_word = bound == ONE_WORD_TOKENS and spec.max_tokens is None
    if one_word:
        return min(ONE_WORD_REPLY, bound), "one-word verdict"
    return min(REASONING_REPLY, bound), "reasoning template (typical length)"


def measured_replies(run_dir: Path) -> dict[str, tuple[float, int]]:
    """judge_id -> (mean tokens_out, ok records with it) over the run directory's log (a
    ``--limit`` trial run's records); empty where there is none."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..store.log import read_table

    if not (run_dir / "log").is_dir():
        return {}
    schema = pa.schema([("judge_id", pa.string()), ("status", pa.string()), ("tokens_out", pa.int64())])
    table = read_table(run_dir, schema)
    table = table.filter(pc.and_(pc.equal(table["status"], "ok"), pc.is_valid(table["tokens_out"])))
    groups = table.group_by("judge_id").aggregate([("tokens_out", "mean"), ("tokens_out", "count")])
    return {jid: (float(mean), int(n)) for jid, mean, n in zip(
        groups["judge_id"].to_pylist(), groups["tokens_out_mean"].to_pylist(), groups["tokens_out_count"].to_pylist(),
        strict=True)}


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
    store = None if manifest.cache is None else ResponseCache(manifest.cache.dir, manifest.cache.max_mb, create=False)
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
    measured = measured_replies(manifest.run_dir)
    for i, j in enumerate(manifest.judges):
        calls = plan.calls_per_judge * j.samples - hits[i]  # every sample a call (hits: of sample 0)
        sent = prompt_bytes[group(j)] * j.samples - hit_bytes[i]
        tokens_in, in_bound = math.ceil(sent / 4), math.ceil(sent / 3)
        per_reply, source = expected_reply(j, measured.get(judge_id(j)))
        tokens_out, bound = math.ceil(calls * per_reply), calls * max_tokens(j)
        price = price_of(j)
        usd = None if price is None else round(cost(price, tokens_in, 0, tokens_out, batch_of(j)), 2)
        usd_bound = None if price is None else round(cost(price, in_bound, 0, bound, batch_of(j)), 2)
        stops = _stops(manifest, j)
        floor = None
        if stops:
            floor = max(0, min(calls, _floor(manifest, plan, len(how[group(j)].keys)) - hits[i]))
        out.append(Estimate(j.name, calls, tokens_in, tokens_out, usd, price.currency if price else None,
                            j.calls == "escalations" or stops, hits[i], floor, in_bound, bound, usd_bound, source))
    return out


def text(estimates: list[Estimate]) -> str:
    lines = []
    for e in estimates:
        bound = "at most " if e.upper_bound else ""
        cost = "" if e.cost is None else f", about {'at most ' if e.upper_bound else ''}{e.cost:,.2f} {e.currency}"
        most = "" if e.cost_bound is None else f", at most {e.cost_bound:,.2f} {e.currency}"
        floor = "" if e.calls_at_least is None else f" (stopping: at least {e.calls_at_least})"
        cached = f"; {e.cached} more from the response cache, free" if e.cached else ""
        lines.append(f"  {e.judge}: {bound}{e.calls} calls{floor}, ~{e.tokens_in:,} tokens in, ~{e.tokens_out:,} "
                     f"tokens out ({e.reply_source}){cost}{cached}\n"
                     f"    bound: ≤{e.tokens_in_bound:,} tokens in, ≤{e.tokens_out_bound:,} tokens out at "
                     f"max_tokens{most}")
    return ("estimated (input: UTF-8 bytes / 4, bound bytes / 3; output: an expected reply length per call, "
            "bound max_tokens):\n" + "\n".join(lines) + "\n")

"""The llama.cpp backend with the Gemma 3 270M GGUF, in-process, behind the micro-batcher."""


import msgspec

import babelrun
from babelrun.judges import judge_spec
from babelrun.store import log
from helpers import needs_llama_cpp, quiet_audit, request, write_manifest

needs_llama_cpp()  # installed, and one real decode runs here without crashing


def test_gemma_judges_through_the_engine_in_batches(tmp_path):
    judge = {"name": "gemma", "backend": "llamacpp", "model": "gemma3-270m", "concurrency": 4,
             "batch_size": 4, "max_wait_ms": 50, "max_tokens": 4, "threads": 2}
    corpus = {"languages": ["en"], "references_per_language": 2}
    path = write_manifest(tmp_path, [judge], corpus=corpus,
                          perturbations=[{"name": "truncate", "severities": [0.6]},
                                         {"name": "repeat_pad", "severities": [0.6]}])
    result = quiet_audit(path)
    assert result.exit_code == 0
    records = list(log.read(tmp_path / "run"))
    assert len(records) == result.planned_calls == 8
    assert all(r.status == "ok" and r.verdict in ("reference", "perturbed", "tie", "invalid") for r in records)
    assert all(r.tokens_in and r.tokens_in > 100 for r in records)  # the whole prompt was read
    assert {r.served_model for r in records} == {"gemma-3-270m-q4_k_m.gguf"}
    assert {r.fingerprint for r in records} == {"llama.cpp multi-sequence"}  # batch_size 4: the low-level path
    card = result.cards.judges[0].overall
    assert card.presentations == 8  # whatever it answered, the card counts it honestly
    # The micro-batches' counters, as stats.json keeps them: every call in a batch, every
    # prompt token either evaluated or taken from a kept prefix, and the prompts of one
    # template sharing their instructions at least (all but the first prompt took a prefix).
    counted = result.stats.judges[0].local
    assert counted is not None and counted.batch_size == 4 and counted.requests == 8
    assert counted.prompt_tokens == sum(r.tokens_in for r in records) == counted.evaluated + counted.reused
    assert counted.prefix_hits == 7 and counted.reused > 7 * 20
    written = msgspec.json.decode((tmp_path / "run" / "stats.json").read_bytes())
    assert written["judges"][0]["local"]["requests"] == 8


def test_micro_batcher_collects_concurrent_requests():
    import anyio

    from babelrun.judges import build
    from babelrun.plan import Plan

    spec = judge_spec(name="g", backend="llamacpp", model="gemma3-270m", batch_size=4, max_wait_ms=200, max_tokens=2)
    judge = build(spec, 0)
    plan = Plan(babelrun.corpus.select(babelrun.Manifest(name="x", judges=[])).references[:1],
                [("truncate", [0.6])], 0)
    (item,) = list(plan.items())
    requests = [request(item, order) for order in ("ref_first", "pert_first")] * 2

    async def go():
        async with anyio.create_task_group() as tg:
            for r in requests:
                tg.start_soon(judge.judge, r)

    anyio.run(go)
    assert judge.batches == [4]  # four concurrent requests, one batch, one thread hop


def test_soft_verdicts_in_one_forward_pass(tmp_path, monkeypatch):
    import math

    from babelrun.judges.llamacpp import LlamaCppJudge

    warmed, warm = [], LlamaCppJudge._warm
    # What the model had read when the warm-up began: a batch *cut* before it (the engine's
    # workers cut batches while the model thread loads) is fine, a batch *run* is not.
    monkeypatch.setattr(LlamaCppJudge, "_warm", lambda self: (warmed.append(self.prompt_tokens), warm(self)))
    judge = {"name": "gemma-soft", "backend": "llamacpp", "model": "gemma3-270m", "soft": True, "threads": 2,
             "batch_size": 1}
    corpus = {"languages": ["en"], "references_per_language": 1}
    path = write_manifest(tmp_path, [judge], corpus=corpus, perturbations=[{"name": "truncate", "severities": [0.6]}])
    result = quiet_audit(path)
    records = list(log.read(tmp_path / "run"))
    assert result.exit_code == 0 and len(records) == 2
    # The model was loaded and its weights read before the first batch (while the audit
    # planned), and the warm-up left nothing in the context: the first prompt found no kept
    # prefix, the second the one it shares with the first (one at a time: batch_size 1).
    assert warmed == [0]  # once, before any prompt reached the model
    counted = result.stats.judges[0].local
    assert counted.batches == 2 and counted.prefix_hits == 1
    for r in records:
        assert r.tokens_out == 0  # nothing generated
        assert r.p_a is not None and math.isclose(r.p_a + r.p_b + r.p_tie, 1.0, abs_tol=1e-5)
        best = max(("A", r.p_a), ("B", r.p_b), ("tie", r.p_tie), key=lambda p: p[1])[0]
        assert r.slot == best
    assert result.cards.judges[0].overall.soft_margin.n == 2


def _distinct_requests(n: int):
    """``n`` distinct presentations (both orders of several items), as an audit sends them."""
    from babelrun.plan import Plan

    refs = babelrun.corpus.select(babelrun.Manifest(name="x", judges=[])).references[:2]
    plan = Plan(refs, [("truncate", [0.3, 0.6]), ("repeat_pad", [0.6])], 0)
    out, seen = [], set()
    for item in plan.items():
        for order in ("ref_first", "pert_first"):
            shown = request(item, order)
            if str(shown.messages) not in seen:
                seen.add(str(shown.messages))
                out.append(shown)
    return out[:n]


def _judge(multi: bool, **spec):
    from babelrun.judges import build

    judge = build(judge_spec(name="g", backend="llamacpp", model="gemma3-270m", batch_size=8, threads=2, **spec), 0)
    judge.multi_sequence = multi
    return judge


# The probabilities of the two paths differ by float rounding only: llama.cpp's kernels sum in
# another order for other batch shapes. The one-at-a-time path differs from itself by ~0.01 on
# one prompt depending on the prefix its cache held; 0.03 is the stated tolerance.
TOLERANCE = 0.03


def test_multi_sequence_soft_verdicts_agree_with_one_at_a_time():
    requests = _distinct_requests(8)
    requests.append(requests[0])  # an identical prompt shares every cell of the tree
    one, multi = _judge(False, soft=True), _judge(True, soft=True)
    expected = one._run_batch(requests)
    got = multi._run_batch(requests)
    assert multi._decoder is not None  # the low-level path ran
    assert {r.fingerprint for r in got} == {"llama.cpp multi-sequence"}
    assert {r.fingerprint for r in expected} == {"llama.cpp one-at-a-time"}
    for e, g in zip(expected, got, strict=True):
        assert g.tokens_in == e.tokens_in and g.tokens_out == 0
        assert max(abs(a - b) for a, b in zip(e.probs, g.probs, strict=True)) <= TOLERANCE
        ranked = sorted(e.probs, reverse=True)
        if ranked[0] - ranked[1] > 2 * TOLERANCE:  # the verdict, where it is not a near-tie
            assert e.probs.index(ranked[0]) == g.probs.index(max(g.probs))
    assert got[-1] == got[0]  # the duplicate read the same logits


def test_multi_sequence_generated_verdicts_agree_with_one_at_a_time():
    requests = _distinct_requests(6)
    one, multi = _judge(False, max_tokens=4), _judge(True, max_tokens=4)
    expected = one._run_batch(requests)
    got = multi._run_batch(requests)
    assert [(r.raw, r.tokens_in, r.tokens_out) for r in got] == [(r.raw, r.tokens_in, r.tokens_out) for r in expected]
    assert {r.fingerprint for r in got} == {"llama.cpp multi-sequence"}


def test_falls_back_to_one_at_a_time_without_the_low_level_api(monkeypatch):
    from babelrun.judges import llamacpp_batch

    monkeypatch.setattr(llamacpp_batch, "available", lambda: False)
    judge = _judge(None, max_tokens=2)  # the default: multi-sequence where it can
    (reply,) = judge._run_batch(_distinct_requests(1))
    assert reply.fingerprint == "llama.cpp one-at-a-time" and judge._decoder is None


def _in_batches(judge, requests, size):
    """The requests through the judge's model thread ``size`` at a time, as the micro-batcher
    hands them over; the replies and each batch's prompt tokens."""
    from babelrun.judges.llamacpp import prompt_tokens

    replies, batches = [], []
    for k in range(0, len(requests), size):
        chunk = requests[k:k + size]
        batches.append([prompt_tokens(judge._llm(), r) for r in chunk])
        replies += judge._run_batch(chunk)
    return replies, batches


def _sized(judge):
    """The judge with its decoder made for the longest of these prompts from the start (a
    batch that needs longer streams makes the decoder again, empty: nothing kept)."""
    judge._decoder_for(judge._llm(), 4, 1024)
    return judge


def test_prefixes_kept_across_micro_batches_give_the_one_at_a_time_verdicts():
    from babelrun.judges.protocol import slot_reader

    requests = _distinct_requests(12)
    one, multi = _judge(False, max_tokens=4), _judge(True, max_tokens=4)
    expected = one._run_batch(requests)
    got, _ = _in_batches(multi, requests[:6], 2)  # the agreement test's six, three micro-batches of two:
    assert multi._decoder is not None and multi._decoder.reused > 0  # the second and third take prefixes
    assert [(r.raw, r.tokens_in, r.tokens_out) for r in got] == [(r.raw, r.tokens_in, r.tokens_out)
                                                                 for r in expected[:6]]  # the same text
    got += _in_batches(multi, requests[6:], 3)[0]  # more, taking from the six before
    assert {r.fingerprint for r in got} == {"llama.cpp multi-sequence"}
    read = slot_reader(None)
    # The verdicts agree; the text after the verdict token may not: on one of these prompts the
    # next token after " A" is a near-tie (newline 15.545 against "." 15.420 in the logits),
    # which the one-at-a-time path itself breaks either way depending on the prefix it kept.
    assert [read(r.raw) for r in got] == [read(r.raw) for r in expected]
    assert [r.tokens_in for r in got] == [r.tokens_in for r in expected]
    _counted_as_each_path_reads(one, multi, requests)


def _counted_as_each_path_reads(one, multi, requests):
    """The batching counters: every prompt token evaluated or reused, on both paths; the
    one-at-a-time path reuses what a prompt shares with the one before (its first prompt,
    with whatever an earlier test left in the shared model's cache: up to all but a token),
    the batched path what its decoder copied, every prompt after the first taking a prefix."""
    from babelrun.judges import llamacpp_batch
    from babelrun.judges.llamacpp import prompt_tokens

    prompts = [prompt_tokens(one._llm(), r) for r in requests]
    total = sum(map(len, prompts))
    assert one.prompt_tokens == multi.prompt_tokens == total
    assert one.evaluated + one.reused == multi.evaluated + multi.reused == total
    after_first = sum(min(llamacpp_batch.common(a, b), len(b) - 1) for a, b in zip(prompts, prompts[1:], strict=False))
    assert after_first <= one.reused <= after_first + len(prompts[0]) - 1
    assert (multi.evaluated, multi.reused) == (multi._decoder.evaluated, multi._decoder.reused)
    assert multi.prefix_hits == len(prompts) - 1 and multi.evaluated < one.evaluated


def test_prefixes_kept_across_micro_batches_give_the_one_at_a_time_soft_verdicts():
    requests = _distinct_requests(10)
    one, multi = _judge(False, soft=True), _judge(True, soft=True)
    expected = one._run_batch(requests)
    got, _ = _in_batches(multi, requests, 3)
    for e, g in zip(expected, got, strict=True):
        assert max(abs(a - b) for a, b in zip(e.probs, g.probs, strict=True)) <= TOLERANCE
        ranked = sorted(e.probs, reverse=True)
        if ranked[0] - ranked[1] > 2 * TOLERANCE:
            assert e.probs.index(ranked[0]) == g.probs.index(max(g.probs))


def test_the_next_micro_batch_evaluates_none_of_the_prefix_it_shares_with_the_last():
    from babelrun.judges import llamacpp_batch

    requests = _distinct_requests(8)
    judge = _sized(_judge(True, max_tokens=2))
    _, (first, second) = _in_batches(judge, requests, 4)
    decoder = judge._decoder
    instructions = min(llamacpp_batch.common(first[0], p) for p in first + second)  # every prompt's
    assert instructions > 20  # the template's instructions (and the BOS token)
    for prompt, start in zip(second, decoder.first_evaluated, strict=True):
        assert start >= instructions  # none of the shared prefix evaluated again
        assert start == min(max(llamacpp_batch.common(p, prompt) for p in first + second[:second.index(prompt)]),
                            len(prompt) - 1)
    evaluated = decoder.evaluated
    judge._run_batch(requests[4:8])  # the same batch again: every prompt but its last token kept
    assert decoder.first_evaluated == [len(p) - 1 for p in second]
    assert decoder.evaluated - evaluated == len(second)
    cold = _sized(_judge(True, max_tokens=2))
    cold.keep_prefix = False  # the same two batches, nothing kept: the second evaluates its instructions
    _in_batches(cold, requests, 4)
    assert cold._decoder.first_evaluated[0] == 0
    assert cold._decoder.evaluated > evaluated


def test_the_kept_cache_stays_bounded_over_many_micro_batches():
    import llama_cpp

    requests = _distinct_requests(24)
    judge = _sized(_judge(True, max_tokens=2))
    _in_batches(judge, requests[:4], 4)
    decoder = judge._decoder
    n_ctx = llama_cpp.llama_n_ctx(decoder._ctx)
    for k in range(4, len(requests), 4):
        judge._run_batch(requests[k:k + 4])
        assert judge._decoder is decoder and llama_cpp.llama_n_ctx(decoder._ctx) == n_ctx  # never grown
        assert len(decoder.resident) == 4  # the last batch's prompts, nothing older
        held = [llama_cpp.llama_memory_seq_pos_max(decoder._memory, seq) + 1 for seq, _ in decoder.resident]
        assert all(len(tokens) <= n <= len(tokens) + 2 for n, (_, tokens) in zip(held, decoder.resident, strict=True))
        assert decoder.held() == sum(len(tokens) for _, tokens in decoder.resident) <= 4 * decoder.n_cells
        others = {seq for seq in range(2 * decoder.n_seq)} - {seq for seq, _ in decoder.resident}
        assert all(llama_cpp.llama_memory_seq_pos_max(decoder._memory, seq) == -1 for seq in others)  # freed


def test_a_decoder_made_larger_keeps_the_prefixes_of_the_batch_before():
    # A longer prompt makes the decoder again, larger: the kept prompts' KV state is copied
    # into the new context (Decoder.adopt), so the next batch still starts past the shared
    # instructions, and its text is still the one-at-a-time text.
    from babelrun.judges import llamacpp_batch
    from babelrun.judges.protocol import slot_reader

    requests = _distinct_requests(8)
    one, multi = _judge(False, max_tokens=4), _judge(True, max_tokens=4)
    expected = one._run_batch(requests)
    got, (first,) = _in_batches(multi, requests[:4], 4)
    small = multi._decoder
    bigger = multi._decoder_for(multi._llm(), 4, 2 * small.n_cells)  # what a longer prompt does
    assert bigger is not small and bigger.n_cells > small.n_cells
    assert [tokens for _, tokens in bigger.resident] == first  # adopted, in sequences 0..
    more, (second,) = _in_batches(multi, requests[4:], 4)
    instructions = min(llamacpp_batch.common(first[0], p) for p in first + second)
    assert instructions > 20 and min(bigger.first_evaluated) >= instructions  # none evaluated again
    read = slot_reader(None)  # verdicts, as the other kept-prefix test compares them (near-ties)
    assert [(read(r.raw), r.tokens_in) for r in got + more] == [(read(r.raw), r.tokens_in) for r in expected]

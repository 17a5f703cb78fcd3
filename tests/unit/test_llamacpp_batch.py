"""The prefix tree a micro-batch of prompts is decoded as (judges/llamacpp_batch.py); no model needed."""

from babelrun.judges.llamacpp_batch import Segment, prefix_tree, sample


def _cover(prompts, tree):
    """(prompt, position) -> the segments that hold it, checking each segment's tokens agree."""
    held = {}
    for segment in tree:
        for p in range(segment.start, segment.stop):
            assert len({prompts[s][p] for s in segment.seqs}) == 1  # one token, shared
            for s in segment.seqs:
                held.setdefault((s, p), []).append(segment)
    return held


def test_every_token_once_shared_prefixes_once():
    prompts = [[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 6], [1, 2, 6], [7]]
    tree = prefix_tree(prompts)
    held = _cover(prompts, tree)
    assert sorted(held) == sorted((s, p) for s, prompt in enumerate(prompts) for p in range(len(prompt)))
    assert all(len(segments) == 1 for segments in held.values())  # every token in exactly one segment
    assert Segment(0, 2, (0, 1, 2, 3)) in tree  # the common prefix, evaluated once for four prompts
    assert Segment(2, 3, (0, 1)) in tree and Segment(2, 3, (2, 3)) in tree  # the identical pair shares all
    assert sum(s.stop - s.start for s in tree) == 2 + 1 + 1 + 1 + 1 + 1  # 7 cells for 16 tokens


def test_parents_come_before_children():
    prompts = [[5, 1, 1, 2], [5, 1, 1, 3], [5, 1, 9], [5, 8]]
    tree = prefix_tree(prompts)
    seen: set[tuple[int, int]] = set()
    for segment in tree:
        for s in segment.seqs:  # everything before this segment, in every prompt it serves, came first
            assert all((s, p) in seen for p in range(segment.start))
        seen |= {(s, p) for s in segment.seqs for p in range(segment.start, segment.stop)}


def test_a_prompt_that_is_a_prefix_of_another_ends_inside_the_shared_segment():
    prompts = [[1, 2, 3], [1, 2, 3, 4, 5]]
    tree = prefix_tree(prompts)
    assert tree == [Segment(0, 3, (0, 1)), Segment(3, 5, (1,))]


def test_greedy_is_argmax_and_sampling_stays_in_the_top_tokens():
    import numpy as np

    logits = np.array([0.0, 5.0, 4.9, -3.0, 1.0], dtype=np.float32)
    rng = np.random.default_rng(0)
    assert sample(logits, 0.0, rng) == 1
    drawn = {sample(logits, 1.0, rng) for _ in range(200)}
    assert drawn == {1, 2}  # min-p (5% of the best) leaves only the two near-equal tokens


def test_a_prompt_starts_from_the_longest_prefix_evaluated_before_it():
    from babelrun.judges.llamacpp_batch import Source, evaluates, plan

    resident = [[1, 2, 3, 4, 5], [1, 2, 9]]
    prompts = [[1, 2, 3, 4, 6], [1, 2, 3, 4, 6, 7], [8, 8], [1, 2, 3, 4, 6, 7], [1, 2, 3]]
    sources = plan(prompts, resident)
    assert sources[0] == Source(True, 0, 4)  # from the last batch: 1 2 3 4 kept, 6 evaluated
    assert sources[1] == Source(False, 0, 5)  # from its own batch, evaluated before it
    assert sources[2] is None  # nothing shared: whole
    assert sources[3] == Source(False, 1, 6)  # a duplicate: every token, and its logits, shared
    assert sources[4] == Source(True, 0, 2)  # never its last token: evaluated for its logits
    assert evaluates(prompts, resident) == 1 + 1 + 2 + 0 + 1
    assert evaluates(prompts) == 5 + 1 + 2 + 0 + 1  # without the last batch: prompt 0 whole


def test_equal_prefixes_prefer_the_last_batch_then_the_earliest_prompt():
    from babelrun.judges.llamacpp_batch import Source, plan

    assert plan([[1, 2, 3], [1, 2, 4]], [[1, 2, 5]]) == [Source(True, 0, 2), Source(True, 0, 2)]
    assert plan([[1, 2, 3], [1, 2, 4], [1, 2, 5]], []) == [None, Source(False, 0, 2), Source(False, 0, 2)]

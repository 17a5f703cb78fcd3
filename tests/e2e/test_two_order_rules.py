"""The two-order rules (``dual_order``'s ``rule``, ``agree``'s two-order views) reproduce the
figures a published judge benchmark computes from its own per-item verdicts in both orders.

JudgeBench (github.com/ScalerLab/JudgeBench at e2c52c284e735e139b3daa61c206ee208f36c461)
publishes each judge's verdicts on its pairs in both orders
(``outputs/dataset=judgebench,response_model=gpt-4o-2024-05-13,judge_name=arena_hard,
judge_model=o1-mini-2024-09-12.jsonl``: per pair its ``source``, ``label`` (``A>B`` / ``B>A``)
and ``judgments``, the first on (response_A, response_B), the second on the swapped pair) and
scores them with ``utils/metrics.py`` ``compute_final_metrics``: per pair, +1 for each order
whose decision equals the label, −1 for each that names the other response, a tie (``A=B``) or
no decision 0; the pair is right when the count is positive (``votes``). The same function
counts the pairs right in both orders (``label_both``) and the pairs whose two decisions differ
(``n_inconsistent``: 1 − the same-verdict consistency). ``run_judge.py`` prints its score per
source (mmlu-pro, livebench-reasoning, livebench-math, livecodebench) and overall; the expected
numbers below are what that code prints for the file, which are the paper's and the
leaderboard's figures for the Arena-Hard judge with o1-mini (65.71 overall).

LLMBar (github.com/princeton-nlp/LLMBar at 900616bff90b6c6c8e1681f7d079250637c55992, MIT)
publishes each evaluator's verdicts in both orders (``result.json``) and its own statistics
(``statistics.json``, written by ``LLMEvaluator/evaluate.py``): ``correct_False`` and
``correct_True`` (per order), ``correct_both`` (right in both orders: ``label_both``) and
``equal`` (the same winner in both orders: the same-verdict consistency). GPT-4's "Vanilla"
verdicts on LLMBar_Natural are this directory's fixture ``data/llmbar_natural_gpt4_vanilla.jsonl``
(see ``data/README.md``); its published statistics are 95 / 100, 96 / 100, 93 / 100 and 95 / 100.

JudgeBench's repository carries no licence, so its file is not copied here: the test reads it from
``../shared/data/judgebench/`` (the file as published, under its own name) and skips without
it. The file is converted in the test, decision word by decision word, into the two inputs
babelrun reads: labelled pairs (``<source>/dataset.json``: question, response_A as output 1,
response_B as output 2, the label as 1 or 2) and a replay table (one row per pair and order:
``swap``, the ``winner`` in the data's numbering, the texts shown).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from babelrun.analyses import agree
from helpers import SHARED_DATA, quiet_audit, write_manifest

NATURAL = SHARED_DATA / "llmbar" / "LLMBar_Natural" / "dataset.json"
LLMBAR_VERDICTS = Path(__file__).parent / "data" / "llmbar_natural_gpt4_vanilla.jsonl"
OUTPUTS = (SHARED_DATA / "judgebench"
           / "dataset=judgebench,response_model=gpt-4o-2024-05-13,judge_name=arena_hard,"
             "judge_model=o1-mini-2024-09-12.jsonl")
needs_judgebench = pytest.mark.skipif(not OUTPUTS.exists(), reason="JudgeBench's published outputs absent")
SOURCES = ("mmlu-pro", "livebench-reasoning", "livebench-math", "livecodebench")
# run_judge.py's report for the file (compute_final_metrics, in %), and its pair counts.
PUBLISHED = {"mmlu-pro": 58.44, "livebench-reasoning": 62.24, "livebench-math": 82.14, "livecodebench": 78.57,
             agree.ALL_SETS: 65.71}
PAIRS = {"mmlu-pro": 154, "livebench-reasoning": 98, "livebench-math": 56, "livecodebench": 42, agree.ALL_SETS: 350}
# The same function's n_all_correct (right in both orders) and n_inconsistent over all 350 pairs.
BOTH_CORRECT, INCONSISTENT = 203, 110
# A decision of the first order (response_A shown first) in the data's numbering; the second
# order shows response_B first, so its A>B names output 2. None (no decision) reads invalid.
FIRST = {"A>B": "1", "B>A": "2", "A=B": "tie"}
SECOND = {"A>B": "2", "B>A": "1", "A=B": "tie"}


def _source(source: str) -> str:
    return next(s for s in SOURCES if source.startswith(s))


def _converted(folder: Path) -> tuple[Path, Path]:
    pairs = [json.loads(line) for line in OUTPUTS.read_text(encoding="utf-8").splitlines() if line.strip()]
    sets: dict[str, list[dict]] = {}
    verdicts = []
    for pair in pairs:
        row = {"input": pair["question"], "output_1": pair["response_A"], "output_2": pair["response_B"],
               "label": {"A>B": 1, "B>A": 2}[pair["label"]]}
        sets.setdefault(_source(pair["source"]), []).append(row)
        for swap, judgment, words in ((False, pair["judgments"][0], FIRST), (True, pair["judgments"][1], SECOND)):
            decision = (judgment or {}).get("decision")
            verdicts.append({"id": pair["pair_id"], "swap": swap, "winner": words.get(decision, "invalid"),
                             "output_1": pair["response_A"], "output_2": pair["response_B"]})
    root = folder / "judgebench"
    for name, rows in sets.items():
        (root / name).mkdir(parents=True)
        (root / name / "dataset.json").write_text(json.dumps(rows), encoding="utf-8")
    table = folder / "verdicts.jsonl"
    table.write_text("".join(json.dumps(v) + "\n" for v in verdicts), encoding="utf-8")
    return root, table


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("judgebench")
    root, table = _converted(folder)
    composites = [{"kind": "dual_order", "name": f"o1-mini+{rule}", "of": "o1-mini", "rule": rule}
                  for rule in ("both", "label_both", "votes")]
    manifest = write_manifest(folder, [{"name": "o1-mini", "backend": "replay", "replay": {"path": str(table)}}],
                              composites=composites, scoring={"bootstrap": 0},
                              corpus={"sources": [{"kind": "labelled_pairs", "path": str(root)}], "languages": ["en"]})
    result = quiet_audit(manifest)
    assert result.exit_code == 0
    return folder / "run", root, result.cards


def _overall(cards, judge: str) -> dict[str, object]:
    return {f.family.removeprefix("pairs:"): j.overall for f in cards.pairs for j in f.judges if j.judge == judge}


@needs_judgebench
def test_the_votes_rule_gives_judgebench_s_published_scores_per_source(replayed):
    run, _, cards = replayed
    votes = _overall(cards, "o1-mini+votes")
    assert set(votes) == set(SOURCES)
    for source in SOURCES:
        card = votes[source]
        assert card.items == PAIRS[source]
        # both presentations of a pair carry the combined verdict: accuracy is the share of pairs
        assert round(100 * card.accuracy.value, 2) == PUBLISHED[source], source


@needs_judgebench
def test_agree_s_views_give_judgebench_s_counts_overall(replayed):
    run, root, _ = replayed
    result = agree.run(run, root)  # the labels are JudgeBench's own
    (judge,) = [j for j in result.judges if j.judge == "o1-mini"]
    by_set = {s.set: s for s in judge.sets}
    for name, expected in PUBLISHED.items():
        views = {f.view: f for f in by_set[name].figures}
        votes = views["two orders: votes"]
        assert votes.n == PAIRS[name] and round(100 * votes.agree / votes.n, 2) == expected, name
    whole = by_set[agree.ALL_SETS]
    views = {f.view: f for f in whole.figures}
    outcomes = views["both orders"].outcomes
    assert views["both orders"].rule == "label_both" and outcomes["both"] == BOTH_CORRECT
    assert sum(outcomes.values()) == 350
    assert whole.consistency is not None
    assert (whole.consistency.items, whole.consistency.same_verdict) == (350, 350 - INCONSISTENT)


@needs_judgebench
def test_the_card_carries_label_both_and_the_same_verdict_consistency(replayed):
    _, _, cards = replayed
    base = _overall(cards, "o1-mini")
    label_both = _overall(cards, "o1-mini+label_both")
    both_correct = sum(round(label_both[s].accuracy.value * label_both[s].items) for s in SOURCES)
    same = sum(round(base[s].verdict_consistency.value * base[s].verdict_consistency.n) for s in SOURCES)
    assert both_correct == BOTH_CORRECT
    assert same == 350 - INCONSISTENT
    # decision consistency leaves out the pairs tied in both orders (A=B twice: 5 of them)
    decided = sum(round(base[s].order_consistency.value * base[s].order_consistency.n) for s in SOURCES)
    assert decided == 350 - INCONSISTENT - 5


@pytest.mark.skipif(not NATURAL.exists(), reason="shared LLMBar data absent")
def test_llmbar_s_published_statistics_per_order_in_both_orders_and_equal(tmp_path):
    """statistics.json of GPT-4 Vanilla on LLMBar_Natural: correct_False 95, correct_True 96,
    correct_both 93, equal 95 (of 100)."""
    data = json.loads(NATURAL.read_text(encoding="utf-8"))
    table = tmp_path / "verdicts.jsonl"
    with table.open("w", encoding="utf-8") as f:
        for line in LLMBAR_VERDICTS.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            pair = data[int(row["id"].rsplit("-", 1)[1])]
            f.write(json.dumps({**row, "output_1": pair["output_1"], "output_2": pair["output_2"]}) + "\n")
    manifest = write_manifest(tmp_path, [{"name": "gpt-4", "backend": "replay", "replay": {"path": str(table)}}],
                              composites=[{"kind": "dual_order", "name": "gpt-4+label_both", "of": "gpt-4",
                                           "rule": "label_both"}],
                              scoring={"bootstrap": 0}, corpus={"sources": [{"kind": "labelled_pairs",
                                                                               "path": str(NATURAL)}],
                                                                  "languages": ["en"]})
    result = quiet_audit(manifest)
    assert result.exit_code == 0
    cards = _overall(result.cards, "gpt-4")["LLMBar_Natural"], _overall(result.cards, "gpt-4+label_both")
    base, label_both = cards[0], cards[1]["LLMBar_Natural"]
    assert label_both.accuracy.value == 0.93  # correct_both
    assert base.verdict_consistency.value == 0.95 and base.verdict_consistency.n == 100  # equal
    agreement = agree.run(tmp_path / "run", NATURAL)  # LLMBar's labels are the data's
    (judge,) = [j for j in agreement.judges if j.judge == "gpt-4"]
    (whole,) = judge.sets
    views = {f.view: f for f in whole.figures}
    in_data_order = views["data order"].agree  # swap = False: output 1 shown first
    assert (in_data_order, views["presentations"].agree - in_data_order) == (95, 96)  # correct_False, correct_True
    assert views["both orders"].outcomes["both"] == 93 and views["both orders"].agree == 93
    assert whole.consistency is not None and whole.consistency.same_verdict == 95

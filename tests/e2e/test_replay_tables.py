"""``backend: replay`` on verdict tables as their tools write them (judges/replay_table.py):
MT-Bench's pair judgments (``g1_winner`` / ``g2_winner`` naming model_1 / model_2, answers joined
from the per-model files), Arena-Hard's two games (``A>B``, ``B>>A``), alpaca_eval's soft
``preference``, both orders as a list in one column, and an unreadable decision recorded invalid.
Each replayed record's slot is checked against the file's decision for the texts shown."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from babelrun.judges import replay
from babelrun.judges.replay_table import decide
from babelrun.store import log
from helpers import ROOT, quiet_audit, write_manifest

MT_BENCH = ROOT / "tests" / "fixtures" / "mt_bench_human"
N = 12


def _pairs(folder: Path) -> tuple[Path, list[tuple[str, str, str]]]:
    rows = [(f"Question {i}?", f"A full answer to question {i}.", f"Answer {i}.") for i in range(N)]
    path = folder / "pairs.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["q", "x", "y", "label"])
        w.writerows([(*r, 1 + i % 2) for i, r in enumerate(rows)])
    return path, rows


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("replay_tables")
    data, rows = _pairs(folder)
    games = ["A>B", "B>>A", "A=B", "B>A", "A>>B", "garbled"]
    arena = _write_jsonl(folder / "arena.jsonl", [
        {"question_id": i, "baseline": x, "model_answer": y,
         "games": [{"score": games[i % 6], "judgment": f"g1 {i}"},
                   {"score": games[(i + 1) % 6], "judgment": f"g2 {i}"}]}
        for i, (_, x, y) in enumerate(rows)])
    alpaca = _write_jsonl(folder / "alpaca.jsonl", [
        {"instruction": q, "output_1": x, "output_2": y, "preference": [1.0, 2.0, 1.5, 1.8, 1.2, "n/a"][i % 6]}
        for i, (q, x, y) in enumerate(rows)])
    both = _write_jsonl(folder / "both.jsonl", [
        {"a": x, "b": y, "winners": [["1", "2", "tie"][i % 3], ["2", "tie", "1"][i % 3]]}
        for i, (_, x, y) in enumerate(rows)])
    judges = [
        {"name": "arena", "backend": "replay", "replay": {
            "path": str(arena), "columns": {"output_1": "baseline", "output_2": "model_answer",
                                            "decision": "games[0].score", "decision_swapped": "games[1].score",
                                            "raw": "games[0].judgment", "raw_swapped": "games[1].judgment"}}},
        {"name": "alpaca", "backend": "replay", "replay": {"path": str(alpaca), "columns": {"decision": "preference"}}},
        {"name": "both", "backend": "replay", "replay": {
            "path": str(both), "columns": {"output_1": "a", "output_2": "b", "decision": "winners"}}},
    ]
    source = {"kind": "labelled_pairs", "path": str(data),
              "columns": {"input": "q", "output_1": "x", "output_2": "y"}}
    path = write_manifest(folder, judges, corpus={"sources": [source], "languages": ["en"]})
    result = quiet_audit(path)
    # alpaca_eval's file has one order per pair: the other is not judged, and the audit says so
    assert result.exit_code == 1 and any(f"{N} of {6 * N} planned key(s) have no verdict" in w for w in result.warnings)
    return folder, rows, {j["name"]: j for j in judges}


def _expected(rows: list, decisions: list[tuple]) -> dict[tuple[str, str], str]:
    """(answer shown in A, answer shown in B) -> slot, from each row's two decisions as the tool wrote them."""
    out = {}
    for (_, x, y), (first, second) in zip(rows, decisions, strict=True):
        if first is not None:
            out[(x, y)] = decide(first, False, ("", ""), None).slot
        if second is not None:
            out[(y, x)] = decide(second, True, ("", ""), None).slot
    return out


def _slots(run_dir: Path, judge: str, rows: list) -> dict[tuple[str, str], str | None]:
    """(answer in A, answer in B) -> the slot recorded, from the log and the pairs' gold."""
    by_ref = {f"pairs-{i:04d}": (x, y, 1 + i % 2) for i, (_, x, y) in enumerate(rows)}
    out = {}
    for r in log.read(run_dir):
        if r.judge != judge:
            continue
        x, y, gold = by_ref[r.ref_id]
        ref, pert = (x, y) if gold == 1 else (y, x)
        out[(ref, pert) if r.order == "ref_first" else (pert, ref)] = r.slot if r.status == "ok" else r.error_kind
    return out


def test_arena_hard_games_replayed_slot_for_slot(replayed):
    folder, rows, _ = replayed
    games = ["A>B", "B>>A", "A=B", "B>A", "A>>B", "garbled"]
    expected = _expected(rows, [(games[i % 6], games[(i + 1) % 6]) for i in range(N)])
    assert _slots(folder / "run", "arena", rows) == expected
    assert "invalid" in expected.values()  # "garbled": the judge answered, unreadably: recorded invalid
    raws = {r.raw for r in log.read(folder / "run") if r.judge == "arena"}
    assert {"g1 0", "g2 0"} <= raws


def test_alpaca_eval_preference_read_as_a_soft_verdict(replayed):
    folder, rows, _ = replayed
    prefs = [1.0, 2.0, 1.5, 1.8, 1.2, "n/a"]
    expected = _expected(rows, [(prefs[i % 6], None) for i in range(N)])
    got = _slots(folder / "run", "alpaca", rows)
    assert {k: v for k, v in got.items() if k in expected} == expected
    assert sum(v == "not_in_replay" for v in got.values()) == N  # one order only: the other not judged
    spec = replay.ReplaySpec(path=str(folder / "alpaca.jsonl"), columns={"decision": "preference"})
    soft = [v for v in replay.load(spec).values() if v.probs is not None]
    assert len(soft) == 2 * N // 6 + N // 6 and all(abs(v.probs[0] + v.probs[1] - 1) < 1e-9 for v in soft)
    assert decide(1.8, False, ("", ""), None).probs == pytest.approx((0.2, 0.8, 0.0))
    assert decide(1.5, True, ("", ""), None).slot == "tie"  # an exact tie is a tie


def test_both_orders_as_a_list_in_one_column(replayed):
    folder, rows, _ = replayed
    first, second = ["1", "2", "tie"], ["2", "tie", "1"]
    expected = _expected(rows, [(first[i % 3], second[i % 3]) for i in range(N)])
    assert _slots(folder / "run", "both", rows) == expected


def test_decision_words_of_the_field():
    assert [decide(w, False, ("gpt-4", "claude-v1"), None).slot
            for w in ("A>B", "A>>B", "A=B", "B>A", "[[B]]", 1, "2", "tie", "gpt-4", "claude-v1", "model_b",
                      "tie (bothbad)", "maybe")] == \
        ["A", "A", "tie", "B", "B", "A", "B", "tie", "A", "B", "B", "tie", "invalid"]
    assert decide("model_1", True, ("", ""), None).slot == "B"  # output 1 shown second
    assert decide("left", False, ("", ""), {"left": "1"}).slot == "A"


def test_mt_bench_pair_judgments_replayed_with_answers_joined(tmp_path):
    """FastChat's gpt-4_pair.jsonl shape (question_id, model_1, model_2, g1_winner, g2_winner —
    model_1 / model_2 / tie, g2 already turned back to the models —, judge, g1/g2_judgment, turn),
    replayed on the MT-Bench-shaped labelled pairs."""
    from test_label_tables import MT_BENCH_SOURCE

    votes = json.loads((MT_BENCH / "human_judgments.json").read_text())
    seen, lines = set(), []
    for i, v in enumerate(votes):
        key = (v["question_id"], *sorted((v["model_a"], v["model_b"])), v["turn"])  # one line a pair
        if key in seen:
            continue
        seen.add(key)
        lines.append({"question_id": v["question_id"], "model_1": v["model_a"], "model_2": v["model_b"],
                      "g1_winner": ["model_1", "model_2", "tie"][i % 3],
                      "g2_winner": ["model_2", "tie", "model_1"][i % 3],
                      "judge": ["gpt-4", "pair-v2-multi-turn" if v["turn"] == 2 else "pair-v2"],
                      "g1_judgment": f"[[{'ABC'[i % 3]}]]", "g2_judgment": "...", "turn": v["turn"]})
    judgments = _write_jsonl(tmp_path / "gpt-4_pair.jsonl", lines)
    answers = str(MT_BENCH / "model_answer" / "*.jsonl")
    spec = {"path": str(judgments),
            "columns": {"decision": "g1_winner", "decision_swapped": "g2_winner", "raw": "g1_judgment",
                        "raw_swapped": "g2_judgment"},
            "join": [{"path": answers, "by": {"question_id": "question_id", "model_1": "$file"},
                      "columns": {"output_1": "choices[0].turns"}},
                     {"path": answers, "by": {"question_id": "question_id", "model_2": "$file"},
                      "columns": {"output_2": "choices[0].turns"}}]}
    judges = [{"name": f"gpt4-{t}", "backend": "replay", "replay": {**spec, "judge": f"gpt-4/{t}"}}
              for t in ("pair-v2", "pair-v2-multi-turn")]
    path = write_manifest(tmp_path, judges, corpus={"sources": [MT_BENCH_SOURCE], "languages": ["en"]})
    assert quiet_audit(path).exit_code == 1  # each judge has verdicts for its own turn only
    import msgspec

    from babelrun.corpus import labelled
    from babelrun.spec import LabelledPairsSource

    source = msgspec.convert(MT_BENCH_SOURCE, LabelledPairsSource)
    turn_of = {pid: 2 if row.turns else 1 for pid, _, row, g in labelled.gold(source) if g is not None}
    records = list(log.read(tmp_path / "run"))
    ok = [r for r in records if r.status == "ok"]
    assert {r.slot for r in ok} <= {"A", "B", "tie"}
    assert all(r.error_kind == "not_in_replay" for r in records if r.status != "ok")
    for judge, turn in (("gpt4-pair-v2", 1), ("gpt4-pair-v2-multi-turn", 2)):
        answered = [r.ref_id for r in ok if r.judge == judge]
        assert sorted(answered) == sorted(2 * [p for p, t in turn_of.items() if t == turn])  # both orders


def test_a_replay_table_with_an_unknown_field_is_refused(tmp_path):
    from babelrun.judges import judge_spec
    from babelrun.spec import ReplaySpec

    (tmp_path / "v.jsonl").write_text('{"x": "a", "y": "b", "w": "A"}\n')
    spec = judge_spec(name="r", backend="replay", replay=ReplaySpec(path=str(tmp_path / "v.jsonl"),
                                                                     columns={"decison": "w"}))
    assert replay.check(spec, {}) == ("replay.columns.decison", replay.check(spec, {})[1])
    assert "did you mean 'decision'" in replay.check(spec, {})[1]

"""``backend: replay``: how a replay file is read and checked."""

from __future__ import annotations

import json

from babelrun.judges import judge_id, judge_spec, replay
from babelrun.spec import JudgeSpec, ReplaySpec


def _spec(path, **replay_fields) -> JudgeSpec:
    return judge_spec(name="r", backend="replay", replay=ReplaySpec(path=str(path), **replay_fields))


def test_rows_of_every_shape_become_keys():
    found = replay.entries([
        {"id": "p1", "order": "ref_first", "verdict": "A", "raw": "A."},
        {"id": "p1", "order": "pert_first", "verdict": "reference"},  # reference shown second: slot B
        {"output_1": "x", "output_2": "y", "swap": "true", "winner": 1},  # output 1 (x) shown in B
        {"answer_a": "u", "answer_b": "v", "verdict": "tie"},
        {"id": "p2", "order": "reference", "score": "7.5"},
    ])
    assert found[("id", "p1", "ref_first")] == replay.Verdict("A", None, "A.")
    assert found[("id", "p1", "pert_first")].slot == "B"
    assert found[replay.text_key("y", "x")].slot == "B"
    assert found[replay.text_key("u", "v")].slot == "tie"
    assert found[("id", "p2", "reference")].score == 7.5


def test_an_id_naming_two_verdicts_is_no_key():
    found = replay.entries([{"id": "r1", "order": "ref_first", "verdict": "A"},
                            {"id": "r1", "order": "ref_first", "verdict": "B"},
                            {"id": "r2", "order": "ref_first", "verdict": "B"}])
    assert ("id", "r1", "ref_first") not in found and ("id", "r2", "ref_first") in found


def test_check_refuses_what_it_cannot_read(tmp_path):
    assert replay.check(judge_spec(name="r", backend="replay"), {})[0] == "replay"
    assert replay.check(_spec(tmp_path / "none.jsonl"), {})[0] == "replay.path"
    swap = tmp_path / "swap.jsonl"
    swap.write_text(json.dumps({"id": "p", "swap": False, "winner": 1}) + "\n")
    field, problem = replay.check(_spec(swap), {})
    assert field == "replay.path" and "output_1" in problem
    two = tmp_path / "two.csv"
    two.write_text("judge,item_id,order,slot\na,i1,ref_first,A\nb,i1,ref_first,B\n")
    assert "several judges" in replay.check(_spec(two), {})[1]
    assert replay.check(_spec(two, judge="b"), {}) is None


def test_the_judge_id_is_the_files_content_not_its_path(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    row = json.dumps({"id": "p", "order": "ref_first", "verdict": "A"}) + "\n"
    a.write_text(row)
    b.write_text(row)
    assert judge_id(_spec(a)) == judge_id(_spec(b))
    b.write_text(row.replace('"A"', '"B"'))
    assert judge_id(_spec(a)) != judge_id(_spec(b))


def test_a_replay_file_is_streamed_and_its_texts_not_kept(tmp_path):
    import tracemalloc

    path = tmp_path / "verdicts.jsonl"
    with path.open("w") as f:
        for i in range(5_000):
            f.write(json.dumps({"output_1": f"{i} " + "a" * 2000, "output_2": f"{i} " + "b" * 2000,
                                "swap": i % 2 == 0, "winner": 1 + i % 2, "raw": "Output (a)"}) + "\n")
    size = path.stat().st_size
    tracemalloc.start()
    found = replay.load(ReplaySpec(path=str(path)))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(found) == 5_000 and peak < size / 4  # was ~6x the file: every row and every text held


def test_a_duplicated_key_in_a_replay_row_is_refused(tmp_path):
    path = tmp_path / "v.jsonl"
    path.write_text('{"id": "p1", "order": "ref_first", "verdict": "A", "verdict": "B"}\n')
    problem = replay.check(_spec(path), {})
    assert problem is not None and "v.jsonl:1: key 'verdict' given twice" in problem[1]

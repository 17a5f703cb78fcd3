"""Labelled pairs as other tools publish them, read by one table reader with the source's
``columns``, ``label_map`` and ``join`` (babelrun/corpus/pairtable.py): a CSV in its own column
names and label words, MT-Bench's human judgments (answers in per-model files, questions in
question.jsonl), and a pair file split into questions, answers and labels. Each is audited
unchanged, and ``babelrun agree``'s κ equals scikit-learn's on the same cases."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

import msgspec
import pytest
from sklearn.metrics import cohen_kappa_score

from babelrun.analyses import agree
from babelrun.app.cli import main
from babelrun.store import log
from helpers import ROOT, quiet_audit, simulated, write_manifest

MT_BENCH = ROOT / "tests" / "fixtures" / "mt_bench_human"
MT_BENCH_SOURCE = {
    "kind": "labelled_pairs", "path": str(MT_BENCH / "human_judgments.json"),
    "columns": {"label": "winner", "annotator": "judge", "model_1": "model_a", "model_2": "model_b"},
    "label_map": {"model_a": 1, "model_b": 2, "tie": "tie", "tie (bothbad)": "tie"},
    "join": [{"path": str(MT_BENCH / "question.jsonl"), "by": {"question_id": "question_id"},
              "columns": {"input": "turns"}},
             {"path": str(MT_BENCH / "model_answer" / "*.jsonl"), "by": {"question_id": "question_id",
                                                                         "model_a": "$file"},
              "columns": {"output_1": "choices[0].turns"}},
             {"path": str(MT_BENCH / "model_answer" / "*.jsonl"), "by": {"question_id": "question_id",
                                                                         "model_b": "$file"},
              "columns": {"output_2": "choices[0].turns"}}]}


def _audit(folder: Path, source: dict, accuracy: float = 0.7) -> Path:
    judge = simulated("sim", default_accuracy=accuracy)
    path = write_manifest(folder, [judge], corpus={"sources": [source], "languages": ["en"]})
    assert quiet_audit(path).exit_code == 0
    return folder / "run"


def _choices(run_dir: Path, human: dict[str, str], data_gold: dict[str, str]) -> dict[str, list]:
    """By hand from the log: per order, (the judge's choice in the data's numbering, the human label)."""
    out: dict[str, list] = defaultdict(list)
    for r in log.read(run_dir):
        if r.ref_id not in human:
            continue
        gold = data_gold[r.ref_id]
        better, worse = ("2", "1") if gold == "2" else ("1", "2")
        out[r.order].append(({"reference": better, "perturbed": worse}.get(r.verdict, r.verdict), human[r.ref_id]))
    return out


def _kappa_equals_sklearn(result: agree.Agreement, cases: dict[str, list]) -> None:
    (judge,) = result.judges
    views = {f.view: f for f in judge.sets[-1].figures}
    for order in ("ref_first", "pert_first"):
        choices, humans = zip(*cases[order], strict=True)
        assert views[order].n == len(choices)
        assert views[order].kappa == pytest.approx(cohen_kappa_score(choices, humans), abs=1e-12)


# -- a CSV in its own column names and label words ------------------------------------------

def _own_words_csv(folder: Path) -> Path:
    path = folder / "prefs.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["uid", "prompt_text", "resp_x", "resp_y", "preferred"])
        for i in range(30):
            w.writerow([f"q{i}", f"Question {i}?", f"A careful, complete answer to question {i}.",
                        f"Short {i}.", ["CHATGPT", "HUMAN", "NEITHER"][i % 3]])
    return path


def test_csv_in_its_own_names_audited_and_agree_reads_the_runs_own_labels(tmp_path, capsys):
    source = {"kind": "labelled_pairs", "path": str(_own_words_csv(tmp_path)),
              "columns": {"id": "uid", "input": "prompt_text", "output_1": "resp_x", "output_2": "resp_y",
                          "label": "preferred"},
              "label_map": {"CHATGPT": 1, "HUMAN": 2, "NEITHER": "tie"}}
    run_dir = _audit(tmp_path, source)
    assert main(["agree", str(run_dir), "--json"]) == 0  # no labels argument: the run's own, mapped
    doc = json.loads(capsys.readouterr().out)
    assert doc["labels"] == agree.OWN_LABELS and doc["matched"] == 30 and doc["unknown"]["count"] == 0
    assert doc["tie_labelled"] == 10 and doc["judges"][0]["sets"][0]["figures"][0]["n"] == 30
    # the same file given as a label file, with the same options on the command line
    assert main(["agree", str(run_dir), source["path"], "--json", "--columns",
                 json.dumps(source["columns"]), "--label-map", json.dumps(source["label_map"])]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["judges"] == doc["judges"] and again["matched"] == 30


def test_a_label_file_matching_no_pair_is_refused_and_a_partial_one_warned(tmp_path, capsys):
    source = {"kind": "labelled_pairs", "path": str(_own_words_csv(tmp_path)),
              "columns": {"id": "uid", "input": "prompt_text", "output_1": "resp_x", "output_2": "resp_y",
                          "label": "preferred"},
              "label_map": {"CHATGPT": 1, "HUMAN": 2, "NEITHER": "tie"}}
    run_dir = _audit(tmp_path, source)
    none = tmp_path / "none.csv"
    none.write_text("item,label\nother-1,1\nother-2,2\n")
    assert main(["agree", str(run_dir), str(none)]) == 2
    assert "no label in" in capsys.readouterr().err
    some = tmp_path / "some.csv"
    some.write_text("item,label\nq0,1\nq1,2\nother-2,2\n")
    assert main(["agree", str(run_dir), str(some)]) == 0
    err = capsys.readouterr().err
    assert "warning: 2 of 3 labelled pairs" in err and "1 unknown ids" in err
    assert main(["agree", str(run_dir), "--columns", "{id: uid}"]) == 2  # options read a file: LABELS needed
    assert main(["agree", str(run_dir), str(some), "--columns", "{idd: uid}"]) == 2
    assert "unknown field 'idd'" in capsys.readouterr().err


# -- MT-Bench's human judgments ----------------------------------------------------------------

def _mt_bench_votes() -> list[dict]:
    return json.loads((MT_BENCH / "human_judgments.json").read_text())


def _fastchat_human_agreement(votes: list[dict], ban: tuple[str, ...] = ()) -> tuple[int, int]:
    """FastChat's compute_agreement.py (get_mt_bench_votes_data, get_mt_bench_agreement for
    human/human), restated: (agreeing pairs of votes, pairs of votes), both turns."""
    data: list[dict] = [{}, {}]
    for v in votes:
        a, b, w = v["model_a"], v["model_b"], v["winner"]
        key = (v["question_id"], a, b) if a < b else (v["question_id"], b, a)
        w = w if a < b else {"model_a": "model_b", "model_b": "model_a"}.get(w, w)
        data[v["turn"] - 1].setdefault(key, []).append(w)
    agree_n = total = 0
    for turn in data:
        for ws in turn.values():
            for i in range(len(ws) - 1):
                for j in range(i + 1, len(ws)):
                    x, y = ("tie" if "tie" in ws[i] else ws[i]), ("tie" if "tie" in ws[j] else ws[j])
                    if x in ban or y in ban:
                        continue
                    total += 1
                    agree_n += x == y
    return agree_n, total


@pytest.fixture(scope="module")
def mt_bench_run(tmp_path_factory) -> Path:
    return _audit(tmp_path_factory.mktemp("mtbench"), MT_BENCH_SOURCE)


def test_mt_bench_human_judgments_read_as_published(mt_bench_run):
    from babelrun.corpus import labelled
    from babelrun.spec import LabelledPairsSource

    source = msgspec.convert(MT_BENCH_SOURCE, LabelledPairsSource)
    pairs = list(labelled.votes(source))
    votes = _mt_bench_votes()
    keys = {(v["question_id"], *sorted((v["model_a"], v["model_b"])), v["turn"]) for v in votes}
    assert len(pairs) == len(keys)  # both model orders of a pair are one pair
    assert sum(len(v) for *_, v in pairs) == len(votes)
    second_turn = [row for _, _, row, _ in pairs if row.turns]
    assert second_turn and all(len(row.turns) == 1 for row in second_turn)
    question = json.loads((MT_BENCH / "question.jsonl").read_text().splitlines()[0])
    assert any(row.input == question["turns"][1] and row.turns[0].input == question["turns"][0]
               for row in second_turn)


def test_mt_bench_agree_kappa_equals_sklearn_and_the_ceiling_fastchats(mt_bench_run):
    from babelrun.corpus import labelled
    from babelrun.spec import LabelledPairsSource

    result = agree.run(mt_bench_run)  # the run's own labels: the experts' votes, mapped
    source = msgspec.convert(MT_BENCH_SOURCE, LabelledPairsSource)
    majority = {pid: labelled.majority(list(v.values())) for pid, _, _, v in labelled.votes(source)}
    human = {pid: g for pid, g in majority.items() if g is not None}
    assert result.matched == len(human) and result.no_majority.count == len(majority) - len(human)
    _kappa_equals_sklearn(result, _choices(mt_bench_run, human, human))
    agree_n, total = _fastchat_human_agreement(_mt_bench_votes())
    assert result.humans is not None and result.humans.label_pairs == total
    assert result.humans.mean_pairwise_agreement == round(agree_n / total, 4)
    agree_t, total_t = _fastchat_human_agreement(_mt_bench_votes(), ban=("tie",))
    assert result.humans.label_pairs_no_ties == total_t
    assert result.humans.agreement_no_ties == round(agree_t / total_t, 4)


# -- a pair file split into questions, answers and labels -------------------------------------

def _split_files(folder: Path) -> dict:
    """questions.jsonl (keyed by qid), answers.jsonl (line order of labels.csv), labels.csv."""
    with (folder / "questions.jsonl").open("w") as f:
        for i in range(24):
            f.write(json.dumps({"qid": 100 + i, "question": {"text": f"Question number {i}?"}}) + "\n")
    with (folder / "answers.jsonl").open("w") as f, (folder / "labels.csv").open("w", newline="") as g:
        w = csv.writer(g, delimiter=";")
        w.writerow(["pair", "qid", "verdict"])
        for i in range(24):
            f.write(json.dumps({"left": f"A long and correct answer {i}.", "right": f"Wrong {i}."}) + "\n")
            w.writerow([f"p{i}", 100 + i, ["left", "right", "same"][i % 3]])
    return {"kind": "labelled_pairs", "path": str(folder / "labels.csv"),
            "columns": {"id": "pair", "label": "verdict"},
            "label_map": {"left": 1, "right": 2, "same": "tie"},
            "join": [{"path": str(folder / "questions.jsonl"), "by": {"qid": "qid"},
                      "columns": {"input": "question.text"}},
                     {"path": str(folder / "answers.jsonl"), "by": "line",
                      "columns": {"output_1": "left", "output_2": "right"}}]}


def test_split_pair_file_read_and_agree_kappa_equals_sklearn(tmp_path):
    source = _split_files(tmp_path)
    run_dir = _audit(tmp_path, source)
    result = agree.run(run_dir)
    human = {f"p{i}": ["1", "2", "tie"][i % 3] for i in range(24)}
    assert result.matched == 24 and result.tie_labelled == 8
    _kappa_equals_sklearn(result, _choices(run_dir, human, human))
    # the labels file given to agree with the same options (a CSV with ;, its own names)
    again = agree.run(run_dir, source["path"], options=agree.LabelOptions(
        columns=source["columns"], label_map=source["label_map"]))
    assert again.judges == result.judges and again.matched == 24

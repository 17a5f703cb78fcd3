"""The table reader of labelled pairs and verdicts (babelrun/corpus/pairtable.py) on hostile
files: each refusal one line naming the file and the row, nothing blocks, nothing is held
several times over; and the human–human statistics linear in the labels."""

from __future__ import annotations

import json
import os
import threading
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from babelrun.analyses import humans
from babelrun.corpus import labelled, pairtable
from babelrun.corpus.pairtable import TableError
from babelrun.manifest import fields_at


def _read(path: Path) -> list:
    return list(pairtable.rows(path))


@pytest.mark.parametrize(("name", "body", "says"), [
    ("short.csv", "id,label\na,1\nb\n", ":3: 1 cells where the header has 2"),
    ("long.csv", "id,label\na,1,extra\n", ":2: 3 cells where the header has 2"),
    ("twice.csv", "id,label,label\na,1,2\n", ":1: the column 'label' is named twice"),
    ("big.csv", "id,label\na," + "x" * (pairtable.MAX_CELL + 1) + "\n", ":2: a cell over 1024 KiB"),
    ("twice.jsonl", '{"id": "a"}\n{"id": "b", "label": 1, "label": 2}\n', ":2: key 'label' given twice"),
    ("nested.json", '[{"id": "a", "x": {"k": 1, "k": 2}}]', ":1: key 'k' given twice"),
    ("bad.jsonl", '{"id": "a"}\n{"id": \n', ":2: not valid JSON"),
    ("list.jsonl", '[1, 2]\n', ":1: a row is a JSON object"),
    ("deep.jsonl", '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}\n", ":1:"),
])
def test_bad_rows_refused_in_one_line_naming_file_and_row(tmp_path, name, body, says):
    path = tmp_path / name
    path.write_text(body)
    with pytest.raises(TableError) as e:
        _read(path)
    message = str(e.value)
    assert "\n" not in message and message.startswith(str(path)) and says in message


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "labels.csv"
    os.mkfifo(fifo)
    done: list = []
    reader = threading.Thread(target=lambda: done.append(pytest.raises(TableError, _read, fifo)), daemon=True)
    reader.start()
    reader.join(5)
    assert done and "not a regular file" in str(done[0].value)


def test_the_labelled_source_refuses_a_fifo_named_as_dataset(tmp_path):
    from babelrun.spec import LabelledPairsSource

    fifo = tmp_path / "pairs.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(Exception, match="not a regular file"):
        labelled.check(LabelledPairsSource(path=str(fifo)), "corpus.sources[0]")


def test_rows_are_streamed_not_loaded_several_times_over(tmp_path):
    path = tmp_path / "big.jsonl"
    row = {"id": "x", "input": "q" * 500, "output_1": "a" * 500, "output_2": "b" * 500, "label": 1}
    with path.open("w") as f:
        for i in range(20_000):
            f.write(json.dumps({**row, "id": str(i)}) + "\n")
    size = path.stat().st_size
    tracemalloc.start()
    n = sum(1 for _ in pairtable.rows(path))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert n == 20_000 and peak < size / 10  # a row at a time (today's replay: ~6× the size)


def test_a_json_document_is_held_once(tmp_path):
    path = tmp_path / "big.json"
    path.write_text(json.dumps([{"id": str(i), "text": "t" * 1000} for i in range(10_000)]))
    size = path.stat().st_size
    tracemalloc.start()
    n = sum(1 for _ in pairtable.rows(path))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert n == 10_000 and peak < 1.5 * size


def test_join_by_key_and_line_and_a_missing_key_named(tmp_path):
    (tmp_path / "q.jsonl").write_text('{"qid": 1, "t": "Q1"}\n{"qid": 2, "t": "Q2"}\n')
    (tmp_path / "ans").mkdir()
    (tmp_path / "ans" / "m1.jsonl").write_text('{"qid": 1, "a": ["x1", "x1b"]}\n')
    (tmp_path / "labels.csv").write_text("qid,model,label\n1,m1,1\n2,m1,2\n")
    joins = [pairtable.load_join(str(tmp_path / "q.jsonl"), {"qid": "qid"}, {"input": "t"}),
             pairtable.load_join(str(tmp_path / "ans" / "*.jsonl"), {"qid": "qid", "model": "$file"},
                                 {"output_1": "a"})]
    rows = pairtable.records(tmp_path / "labels.csv", {}, joins, ["input", "output_1", "label"])
    number, first = next(rows)
    assert first == {"input": "Q1", "output_1": ["x1", "x1b"], "label": "1"}
    with pytest.raises(TableError, match=r"labels.csv:3: no row in .*ans/\*.jsonl with qid=2, \$file=m1"):
        next(rows)
    line = pairtable.load_join(str(tmp_path / "q.jsonl"), "line", {"input": "t"})
    assert [r["input"] for _, r in pairtable.records(tmp_path / "labels.csv", {}, [line], ["input"])] == ["Q1", "Q2"]


def test_did_you_mean_draws_on_the_tagged_sources_own_fields():
    doc = {"corpus": {"sources": [{"kind": "labelled_pairs"}, {"kind": "jsonl"}]}}
    own = fields_at("corpus.sources[0]", document=doc)
    assert "label_map" in own and "pairs_per_set" in own and "format" not in own  # not the trajectories'
    assert "label_map" not in fields_at("corpus.sources[1]", document=doc)


def _brute(votes: dict[str, dict[str, str]]) -> tuple[int, int]:
    """Agreeing and all pairs of labels on one pair, by pairs of annotators (the quadratic way)."""
    agree_n = total = 0
    for v in votes.values():
        labels = list(v.values())
        for i in range(len(labels)):
            for j in range(i + 1, len(labels)):
                total += 1
                agree_n += labels[i] == labels[j]
    return agree_n, total


def test_human_human_pairwise_agreement_from_counts_equals_the_quadratic_count():
    rng = np.random.default_rng(3)
    votes = {f"p{i}": {f"a{a}": ["1", "2", "tie"][int(rng.integers(0, 3))]
                       for a in rng.choice(40, size=int(rng.integers(1, 8)), replace=False)} for i in range(300)}
    h = humans.humans(votes)
    agree_n, total = _brute(votes)
    assert h is not None and h.label_pairs == total and h.mean_pairwise_agreement == round(agree_n / total, 4)
    assert h.n_annotators == 40 and len(h.annotators) == humans.LISTED
    assert 0 < len(h.pairwise) <= humans.LISTED * (humans.LISTED - 1) // 2 and len(h.vs_rest) == humans.LISTED
    assert all(p.n > 0 for p in h.pairwise)


def test_a_million_labels_from_a_hundred_thousand_annotators():
    """10⁶ labels, 10⁵ annotators, 10⁵ pairs of 10 labels: every count right, the output bounded
    (time and memory are measured apart, not asserted: docs/analyses.md)."""
    rng = np.random.default_rng(0)
    n_pairs, per_pair, n_annotators = 100_000, 10, 100_000
    pair = np.repeat(np.arange(n_pairs), per_pair)
    annotator = (pair * 7919 + np.tile(np.arange(per_pair), n_pairs) * 10_007) % n_annotators
    truth = rng.integers(0, 3, n_pairs)
    label = np.where(rng.random(pair.size) < 0.8, truth[pair], rng.integers(0, 3, pair.size))
    codes = humans.Codes(pair, annotator, label, [f"w{i}" for i in range(n_annotators)], n_pairs)
    h = humans.from_codes(codes)
    counts = np.zeros((n_pairs, 3), dtype=np.int64)
    np.add.at(counts, (pair, label), 1)
    assert h is not None and h.labels == 1_000_000 and h.n_annotators == n_annotators
    assert h.label_pairs == n_pairs * per_pair * (per_pair - 1) // 2
    assert h.mean_pairwise_agreement == round(float((counts * (counts - 1)).sum() / (n_pairs * 90)), 4)
    assert h.alpha_n == n_pairs and h.fleiss_n == 0  # no pair labelled by every annotator
    assert len(h.annotators) <= humans.LISTED and len(h.pairwise) <= 45 and len(h.vs_rest) <= humans.LISTED


def test_a_labels_file_naming_no_pair_is_refused_and_a_partial_one_warned(tmp_path, capsys):
    from babelrun.errors import ManifestError
    from babelrun.spec import LabelledPairsSource

    (tmp_path / "pairs.csv").write_text("id,input,output_1,output_2,label\np1,q,a,b,1\np2,q2,c,d,2\n")
    (tmp_path / "none.csv").write_text("item,label\nx1,1\n")
    (tmp_path / "some.csv").write_text("item,label\np1,2\nx1,1\n")
    source = LabelledPairsSource(path=str(tmp_path / "pairs.csv"), labels=str(tmp_path / "none.csv"))
    with pytest.raises(ManifestError, match=r"corpus.sources\[0\].labels: .*none of its 1 item ids is a pair's id"):
        labelled.check(source, "corpus.sources[0]")
    labelled.check(LabelledPairsSource(path=str(tmp_path / "pairs.csv"), labels=str(tmp_path / "some.csv")),
                   "corpus.sources[0]")
    assert "1 of the file's 2 item ids name a pair" in capsys.readouterr().err

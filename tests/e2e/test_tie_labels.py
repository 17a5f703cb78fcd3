"""A labelled set of our own with tie-labelled pairs, judged by a judge that says tie
on them (a replay judge: its verdicts from a table keyed by pair id and order), through the
whole pipeline: cards, ``agree`` against three annotators, the human–human ceiling."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa
import pytest

from babelrun.analyses import agree
from babelrun.score import columnar, metrics
from babelrun.store import compact
from helpers import quiet_audit, write_manifest

N_DECISIVE, N_TIE = 24, 16


def _pairs(folder: Path) -> Path:
    """40 pairs in a set "ties": 24 decisive (gold 1 or 2), 16 labelled tie (coded 0, as some
    data sets do), each with three annotators' labels whose majority is the gold."""
    rows = []
    for i in range(N_DECISIVE + N_TIE):
        gold = 0 if i >= N_DECISIVE else 1 + i % 2
        dissent = (gold + 1) % 3 if i % 5 == 0 else gold  # every fifth pair: one annotator dissents
        rows.append({"input": f"Question {i}?", "output_1": f"First answer to question {i}, long enough.",
                     "output_2": f"Second answer to {i}.", "labels": [gold, gold, dissent]})
    path = folder / "ties" / "dataset.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(rows))
    return path


def _verdicts(folder: Path) -> Path:
    """The judge's verdicts: the better output on decisive pairs, tie on tie-labelled ones."""
    lines = []
    for i in range(N_DECISIVE + N_TIE):
        for order in ("ref_first", "pert_first"):
            lines.append({"id": f"ties-{i:04d}", "order": order, "verdict": "tie" if i >= N_DECISIVE else "reference",
                          "raw": "Tie." if i >= N_DECISIVE else "The better one."})
    path = folder / "verdicts.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def _ties(folder: Path) -> dict:
    """The corpus of the pairs ``_pairs`` wrote under ``folder``, tie coded 0."""
    return {"sources": [{"kind": "labelled_pairs", "path": str(folder / "ties" / "dataset.json"),
                         "label_map": {0: "tie", 1: 1, 2: 2}}], "languages": ["en"]}


@pytest.fixture(scope="module")
def tie_run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("ties")
    _pairs(folder)
    judge = {"name": "tie-aware", "backend": "replay", "replay": {"path": str(_verdicts(folder))}}
    path = write_manifest(folder, [judge], corpus=_ties(folder))
    assert quiet_audit(path).exit_code == 0
    return folder


def test_a_judge_that_says_tie_on_tie_labelled_pairs_is_right(tie_run):
    cards = msgspec.json.decode((tie_run / "run" / "cards.json").read_bytes())
    (family,) = cards["pairs"]
    card = family["judges"][0]["overall"]
    assert family["family"] == "pairs:ties"
    assert card["items"] == N_DECISIVE + N_TIE and card["tie_labelled"] == N_TIE
    assert card["accuracy"]["value"] == 1.0 and card["order_consistency"]["value"] == 1.0
    # same verdict counts tie/tie on every pair; here every pair's two verdicts are equal
    assert card["verdict_consistency"] == {**card["order_consistency"]}
    assert card["position_bias"]["n"] == 2 * N_DECISIVE  # measured on decisive-labelled pairs
    assert card["tie_rate"]["value"] == 0.4
    # The rules without tie labels (a tie is never correct, never consistent) on the same records:
    data = compact.load(tie_run / "run", columnar.SCORING_COLUMNS)
    tie = np.array(data["kind"].cast(pa.string()).to_pylist()) == "labelled_tie"
    order = metrics.ORDER_CODES
    verdict = np.array([metrics.VERDICTS.index(v) for v in data["verdict"].cast(pa.string()).to_pylist()])
    presented = np.array([order.index(o) for o in data["order"].cast(pa.string()).to_pylist()])
    old_correct = verdict == 0  # the old rule
    new_correct = np.where(tie, verdict == 2, verdict == 0)
    assert tie.sum() == 2 * N_TIE and old_correct[tie].sum() == 0 and new_correct[tie].all()
    assert len(presented) == 2 * (N_DECISIVE + N_TIE)


def test_agree_against_three_annotators_shows_the_ceiling(tie_run, tmp_path):
    # three annotators whose majority is the data's gold: b dissents on some pairs, c on every fourth
    rows = []
    for i in range(N_DECISIVE + N_TIE):
        gold = "tie" if i >= N_DECISIVE else str(1 + i % 2)
        other = {"1": "2", "2": "tie", "tie": "1"}[gold]
        rows += [f"ties-{i:04d},a,{gold}", f"ties-{i:04d},b,{other if i % 7 == 0 and i % 4 else gold}",
                 f"ties-{i:04d},c,{other if i % 4 == 0 else gold}"]
    labels = tmp_path / "labels.csv"
    labels.write_text("item,annotator,label\n" + "\n".join(rows) + "\n")
    result = agree.run(tie_run / "run", labels)
    assert result.matched == N_DECISIVE + N_TIE and result.tie_labelled == N_TIE
    assert result.humans is not None and result.humans.annotators == ["a", "b", "c"]
    assert 0 < result.humans.fleiss_kappa < 1 and result.humans.fleiss_n == N_DECISIVE + N_TIE
    (judge,) = result.judges
    (s,) = judge.sets
    views = {f.view: f for f in s.figures}
    assert list(views) == list(agree.VIEWS)
    both = views["both orders"]
    assert both.per_class["tie"].recall == 1.0 and both.confusion["tie"]["tie"] == N_TIE
    assert both.agreement == 1.0 and both.agreement_no_ties == 1.0 and both.n_no_ties == N_DECISIVE
    assert views["data order"].n == N_DECISIVE + N_TIE  # one presentation per pair shows output 1 first
    # tie/tie on a tie-labelled pair is consistent in both definitions, as on the card
    assert s.consistency == agree.Consistency(N_DECISIVE + N_TIE, N_DECISIVE + N_TIE, 1.0,
                                              N_DECISIVE + N_TIE, 1.0)
    assert views["two orders: votes"].agree == views["two orders: both"].agree == N_DECISIVE + N_TIE
    out = agree.text(result)
    assert "Fleiss' κ" in out and "Krippendorff's α" in out and "confusion (rows: human" in out
    doc = msgspec.json.decode(msgspec.json.encode(result))
    fig = doc["judges"][0]["sets"][0]["figures"][0]
    assert {"agreement", "agreement_no_ties", "kappa", "confusion", "per_class", "macro"} <= set(fig)
    assert set(fig["per_class"]) == {"1", "2", "tie"} and {"precision", "recall", "f1"} <= set(fig["macro"])


def test_pin_and_the_report_count_a_tie_on_a_tie_labelled_pair_as_right(tie_run):
    from babelrun.app.pin import pin

    lock = pin(tie_run / "run")
    (judge,) = lock.judges
    assert judge.labelled_accuracy.value == 1.0 and judge.labelled_accuracy.n == 2 * (N_DECISIVE + N_TIE)
    report = (tie_run / "run" / "report.md").read_text()
    assert "labelled pairs `ties`" in report and "| all | 40 | 1.00 [1.00, 1.00] ✓ | 1.00 [1.00, 1.00] |" in report
    assert "the judge said tie" not in report  # a tie on a tie-labelled pair is no failure


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_a_run_exported_and_replayed_gives_the_same_verdicts(tie_run, tmp_path, fmt):
    from babelrun.app.export import export
    from babelrun.store import log

    (_, presentations) = export(tie_run / "run", tmp_path / "export", fmt)
    folder = tmp_path / "again"
    folder.mkdir()
    judge = {"name": "again", "backend": "replay", "replay": {"path": str(presentations)}}
    path = write_manifest(folder, [judge], corpus=_ties(tie_run))
    result = quiet_audit(path)
    assert result.exit_code == 0

    def verdicts(run: Path) -> dict:
        return {(r.item_id, r.order): (r.verdict, r.raw) for r in log.read(run) if r.status == "ok"}

    assert verdicts(folder / "run") == verdicts(tie_run / "run")  # every verdict, and its raw reply


def test_a_pointwise_judge_giving_equal_scores_on_tie_labelled_pairs_is_right(tie_run, tmp_path):
    lines = []
    for i in range(N_DECISIVE + N_TIE):
        tie = i >= N_DECISIVE
        lines += [{"id": f"ties-{i:04d}", "order": "reference", "score": 7},
                  {"id": f"ties-{i:04d}", "order": "degraded", "score": 7 if tie else 3}]
    scores = tmp_path / "scores.csv"
    scores.write_text("id,order,score\n" + "\n".join(f"{r['id']},{r['order']},{r['score']}" for r in lines) + "\n")
    folder = tmp_path / "pointwise"
    folder.mkdir()
    judge = {"name": "scorer", "backend": "replay", "protocol": "pointwise", "prompt": "pointwise",
             "replay": {"path": str(scores)}}
    path = write_manifest(folder, [judge], corpus=_ties(tie_run))
    result = quiet_audit(path)
    assert result.exit_code == 0
    (jc,) = result.cards.pointwise
    assert jc.overall.items == N_DECISIVE + N_TIE
    assert jc.overall.discrimination.value == 1.0  # equal scores on the 16 tie pairs are right

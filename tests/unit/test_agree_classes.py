"""Tie labels, several annotators and class-conditional rates, checked against
independent implementations (scikit-learn, statsmodels) and Krippendorff's published example."""

from __future__ import annotations

import json

import numpy as np
import pytest

from babelrun.analyses import agree
from babelrun.corpus import labelled
from babelrun.score import metrics, stats
from babelrun.spec import LabelledPairsSource

sklearn_metrics = pytest.importorskip("sklearn.metrics")
inter_rater = pytest.importorskip("statsmodels.stats.inter_rater")


def _generated(seed: int, n: int = 400):
    """Three annotators labelling n pairs in 3 classes (correlated with a latent truth), and a
    judge's choices in the data's frame with some invalid replies (code 3) and splits (4)."""
    rng = np.random.default_rng(seed)
    truth = rng.choice(3, size=n, p=[0.4, 0.35, 0.25])
    annotators = np.where(rng.random((3, n)) < 0.75, truth, rng.integers(0, 3, size=(3, n)))
    judge = np.where(rng.random(n) < 0.7, truth, rng.integers(0, 5, size=n))
    return truth, annotators, judge


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_class_conditional_figures_equal_scikit_learn(seed):
    _, annotators, judge = _generated(seed)
    human = annotators[0]
    f = agree._figure("x", judge, human, 0.95, "seed")
    p, r, f1, support = sklearn_metrics.precision_recall_fscore_support(
        human, judge, labels=[0, 1, 2], zero_division=0)
    for c, name in enumerate(agree.CLASSES):
        got = f.per_class[name]
        assert (got.precision, got.recall, got.f1, got.support) == (
            round(p[c], 4), round(r[c], 4), round(f1[c], 4), support[c])
    mp, mr, mf, _ = sklearn_metrics.precision_recall_fscore_support(
        human, judge, labels=[0, 1, 2], average="macro", zero_division=0)
    assert (f.macro.precision, f.macro.recall, f.macro.f1) == (round(mp, 4), round(mr, 4), round(mf, 4))
    assert round(f.kappa, 4) == round(sklearn_metrics.cohen_kappa_score(human, judge), 4)
    assert f.agreement == round(sklearn_metrics.accuracy_score(human, judge), 4)
    decisive = human != 2
    assert f.agreement_no_ties == round(sklearn_metrics.accuracy_score(human[decisive], judge[decisive]), 4)
    cm = sklearn_metrics.confusion_matrix(human, np.minimum(judge, 3), labels=[0, 1, 2, 3])
    assert [[f.confusion[c][col] for col in (*agree.CLASSES, agree.OTHER)] for c in agree.CLASSES] == cm[:3].tolist()
    # every figure has its interval, around it
    for name in agree.CLASSES:
        got = f.per_class[name]
        for value, (lo, hi) in ((got.precision, got.precision_interval), (got.recall, got.recall_interval),
                                (got.f1, got.f1_interval)):
            assert lo <= value <= hi
    assert f.kappa_interval[0] <= f.kappa <= f.kappa_interval[1]
    assert f.base_rates["human"]["tie"] == round(float((human == 2).mean()), 4)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_human_ceiling_equals_statsmodels_fleiss_kappa(seed):
    _, annotators, _ = _generated(seed)
    votes = {f"p{i}": {f"a{k}": agree.CLASSES[annotators[k, i]] for k in range(3)}
             for i in range(annotators.shape[1])}
    h = agree.humans(votes)
    table, _ = inter_rater.aggregate_raters(annotators.T, n_cat=3)
    assert h.fleiss_kappa == round(inter_rater.fleiss_kappa(table, method="fleiss"), 4)
    assert h.fleiss_n == annotators.shape[1] and h.annotators == ["a0", "a1", "a2"]
    for pair in h.pairwise:
        a, b = int(pair.a[1]), int(pair.b[1])
        assert pair.kappa == round(sklearn_metrics.cohen_kappa_score(annotators[a], annotators[b]), 4)
        assert pair.agreement == round(float((annotators[a] == annotators[b]).mean()), 4)
    for rest in h.vs_rest:
        k = int(rest.annotator[1])
        others = [o for o in range(3) if o != k]
        keep = annotators[others[0]] == annotators[others[1]]  # two others: a majority only where they agree
        assert rest.n == int(keep.sum())
        expected = sklearn_metrics.cohen_kappa_score(annotators[k][keep], annotators[others[0]][keep])
        assert rest.kappa == round(expected, 4)


def test_krippendorff_alpha_reproduces_the_published_example():
    # Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability": 4 coders, 12 units,
    # missing values; nominal α = 0.743.
    coders = [[1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
              [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
              [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
              [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None]]
    counts = np.array([[sum(1 for c in coders if c[u] == v) for v in range(1, 6)] for u in range(12)])
    assert round(stats.krippendorff_alpha_nominal(counts), 3) == 0.743


def test_labels_map_a_data_sets_coding_and_take_the_majority(tmp_path):
    rows = [{"input": "q", "output_1": "a", "output_2": "b", "label": 0},
            {"input": "q", "output_1": "c", "output_2": "d", "labels": [1, 2, 2]},
            {"input": "q", "output_1": "e", "output_2": "f", "labels": [0, 1, 2]},  # no majority
            {"input": "q", "output_1": "g", "output_2": "h", "labels": {"ann": 1, "bob": 1}}]
    path = tmp_path / "mine.json"  # set "mine"
    path.write_text(json.dumps(rows))
    source = LabelledPairsSource(path=str(path), label_map={0: "tie", 1: 1, 2: 2})
    labelled.check(source, "corpus.sources[0]")
    pairs = list(labelled.read_pairs(source))
    assert [(p.pair_id, p.tie, p.better) for p in pairs] == [("mine-0000", True, "a"), ("mine-0001", False, "d"),
                                                             ("mine-0003", False, "g")]
    assert labelled.no_majority(source) == ["mine-0002"]
    with pytest.raises(Exception, match="not 1, 2 or tie"):
        labelled.check(LabelledPairsSource(path=str(path)), "corpus.sources[0]")  # 0 without a label_map
    csv = tmp_path / "labels.csv"
    csv.write_text("item,annotator,label\nmine-0000,a,1\nmine-0000,b,tie\nmine-0000,c,tie\n")
    votes, _ = labelled.read_label_file(csv)
    assert votes == {"mine-0000": {"a": "1", "b": "tie", "c": "tie"}}


def test_tie_labelled_items_are_right_on_a_tie_and_consistent_tie_tie():
    # two items: a tie-labelled pair answered tie/tie, a decisive one answered reference/perturbed
    order = np.array([0, 1, 0, 1])
    verdict = np.array([2, 2, 0, 1])  # reference, perturbed, tie, invalid codes 0..3
    lengths = np.array([100, 100, 100, 100])
    tie = np.array([1, 1, 0, 0])
    table = metrics.item_table(np.array([0, 2]), metrics.presentation_code(order, verdict, lengths, lengths * 2, tie))
    sums = table.sum(axis=0)
    values = metrics.from_sums(sums)
    assert values["accuracy"] == 0.75 and values["order_consistency"] == 0.5
    assert values["position_bias"] == 1.0  # on the decisive pair only: it named slot A twice
    old = metrics.from_sums(metrics.item_table(np.array([0, 2]), metrics.presentation_code(
        order, verdict, lengths, lengths * 2)).sum(axis=0))
    assert old["accuracy"] == 0.25 and old["order_consistency"] == 0.0  # the old rules: a tie is always wrong

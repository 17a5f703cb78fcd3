"""The card's definitions on hand-counted tables: each metric as defined, independent of record
order, and an empty table. (Bias recovery through whole simulated audits is
e2e/test_scoring.py.)"""

import pyarrow as pa
import pytest

from babelrun.score import score
from babelrun.store import compact
from babelrun.store.log import Record


def _records(rows):
    """Hand-made records: (item, order, verdict, ref_len, pert_len)."""
    recs = [
        Record(judge_id="j", item_id=i, order=o, status="ok", judge="J", kind="text", lang="en", ref_id=i,
               perturbation="p", severity=0.3, ref_len=rl, pert_len=pl, verdict=v)
        for i, o, v, rl, pl in rows
    ]
    return compact.table(recs)


def test_definitions_on_a_hand_counted_table():
    data = _records([
        ("i1", "ref_first", "reference", 100, 50),   # slot A, correct, chose longer
        ("i1", "pert_first", "reference", 100, 50),  # slot B, correct, chose longer
        ("i2", "ref_first", "reference", 100, 200),  # slot A, correct, chose shorter
        ("i2", "pert_first", "perturbed", 100, 200), # slot A, wrong, chose longer
        ("i3", "ref_first", "tie", 100, 100),
        ("i3", "pert_first", "invalid", 100, 100),
    ])
    card = score(data, [], replicates=0).judges[0].overall
    assert card.accuracy.value == pytest.approx(3 / 6, abs=1e-4)
    assert card.position_bias.value == pytest.approx((3 - 1) / 6, abs=1e-4)
    assert card.order_consistency.value == pytest.approx(1 / 3, abs=1e-4)  # only i1 agrees decisively
    # v = 1/2 [P(longer | longer worse) + P(longer | longer better)] = 1/2 [1/2 + 1]
    assert card.verbosity.value == pytest.approx(0.75)
    r = (0.6 * 0.5 + 0.4 / 3) * (1 - 0.8 / 3) * (1 - 0.7 * 0.5)
    assert card.reliability.value == pytest.approx(r, abs=1e-4)
    assert (card.tie_rate.value == pytest.approx(1 / 6, abs=1e-4)
            and card.invalid_rate.value == pytest.approx(1 / 6, abs=1e-4))


def test_record_order_never_changes_a_card():
    rows = [(f"i{k}", o, "reference", 10, 5) for k in range(50) for o in ("ref_first", "pert_first")]
    a = score(_records(rows), [], replicates=100, seed=3)
    b = score(_records(list(reversed(rows))), [], replicates=100, seed=3)
    assert a == b  # record order never changes a card


def test_empty_table():
    cards = score(pa.table({"judge_id": pa.array([], pa.string())}), [], replicates=10)
    assert cards.judges == []


def _reference_bootstrap(counts, rows, replicates, confidence, rng):
    """One card's bootstrap as its definition reads: multinomial weights over the distinct
    rows, the metrics of each replicate, then each metric's percentile interval."""
    import numpy as np

    from babelrun.score import metrics

    n = int(counts.sum())
    if n == 0:
        return {}
    weights = rng.multinomial(n, counts / n, size=replicates).astype(np.float64)
    tail = (1 - confidence) / 2
    out = {}
    for name, values in metrics.from_sums(weights @ rows).items():
        finite = values[np.isfinite(values)]
        if finite.size:
            lo, hi = np.quantile(finite, [tail, 1 - tail])
            out[name] = (float(lo), float(hi))
    return out


def test_many_cards_bootstrapped_at_once_are_each_cards_own():
    """``bootstraps`` draws several cards in one pass: each card's intervals are exactly its own
    bootstrap's, including metrics undefined in some replicates (few items) and a card with none."""
    import numpy as np

    from babelrun.score import metrics

    gen = np.random.default_rng(7)
    table = gen.integers(0, 3, size=(400, len(metrics.STATS)))
    rows, pattern_of = metrics.patterns(table)
    spans = [(0, 400), (0, 3), (10, 12), (5, 5), (100, 260), (7, 8)]
    counts = [np.bincount(pattern_of[a:b], minlength=len(rows)) for a, b in spans]
    got = metrics.bootstraps(counts, rows, 50, 0.9, [np.random.default_rng(s) for s in range(len(spans))])
    want = [_reference_bootstrap(c, rows, 50, 0.9, np.random.default_rng(s)) for s, c in enumerate(counts)]
    assert got == want
    assert got[3] == {} and any(len(w) < len(want[0]) for w in want if w)  # none drawn; some metrics undefined


@pytest.mark.parametrize("block", [1, 4])
def test_a_runs_cards_do_not_depend_on_how_many_are_bootstrapped_at_once(monkeypatch, block):
    import msgspec

    from babelrun.score import metrics

    data = compact.table([
        Record(judge_id="j", item_id=f"i{k}", order=o, status="ok", judge="J", kind="text",
               lang=("en", "de", "sw")[k % 3], ref_id=f"r{k}", perturbation=("p", "q")[k % 2], severity=0.3,
               ref_len=100, pert_len=40 + k % 90, verdict=("reference", "perturbed", "tie")[(k * 7 + len(o)) % 3])
        for k in range(90) for o in ("ref_first", "pert_first")])
    cards = score(data, [], replicates=80)
    assert sum(1 + len(lc.perturbations) for lc in cards.judges[0].languages) == 9  # 10 cards with the judge's
    whole = msgspec.json.encode(score(data, [], replicates=80))
    monkeypatch.setattr(metrics, "bootstrap_block", lambda replicates, rows: block)
    assert msgspec.json.encode(score(data, [], replicates=80)) == whole

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

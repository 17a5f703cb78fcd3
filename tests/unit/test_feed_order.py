"""The feed's order (``plan.order``): fair to every cell at any prefix, consistent with the
stopping cells' order, and, grouped, a reference's items together."""

from __future__ import annotations

from collections import Counter

import msgspec
import pytest

import babelrun
from babelrun.plan import Plan

PERTURBATIONS = [{"name": p, "severities": [0.3, 0.6]} for p in ("truncate", "shuffle", "repeat_pad")]


@pytest.fixture(scope="module")
def plan(tmp_path_factory) -> Plan:
    path = tmp_path_factory.mktemp("order") / "m.yaml"
    path.write_bytes(msgspec.yaml.encode({
        "name": "t", "seed": 5, "judges": [{"name": "s", "backend": "simulated"}],
        "corpus": {"sources": [{"kind": "bundled"}], "languages": "all", "references_per_language": 4},
        "perturbations": PERTURBATIONS}))
    return Plan.from_manifest(babelrun.load_manifest(path))


def _placed(plan: Plan) -> dict[str, tuple[str, str, str]]:
    return {i.item_id: (i.lang, i.perturbation, i.ref_id) for i in plan.items()}


@pytest.mark.parametrize("grouped", [False, True])
def test_every_cell_is_fed_in_its_stopping_order(plan, grouped):
    """The engine's stopper waits on each cell's prefix in ``stopping_cells`` order: the feed
    must issue every cell's items in exactly that order, grouped or not."""
    feed = plan.interleaved(stratified=True, grouped=grouped)
    assert sorted(feed) == sorted(plan.item_ids)
    where = _placed(plan)
    for cell, ids in plan.stopping_cells(per_perturbation=True).items():
        fed = [iid for iid in feed if "/".join(where[iid][:2]) == cell]
        assert fed == ids, cell


def test_unstratified_feed_follows_each_languages_own_order(plan):
    feed = plan.interleaved(stratified=False)
    where = _placed(plan)
    for lang, ids in plan.stopping_cells(per_perturbation=False).items():
        assert [iid for iid in feed if where[iid][0] == lang] == ids


def test_an_item_at_a_time_keeps_every_language_and_cell_within_one_item(plan):
    feed = plan.interleaved(stratified=True, grouped=False)
    where = _placed(plan)
    langs = {w[0] for w in where.values()}
    for n in range(1, len(feed)):
        by_lang = Counter(where[iid][0] for iid in feed[:n])
        counts = [by_lang.get(lang, 0) for lang in langs]
        assert max(counts) - min(counts) <= 1, n


def test_grouped_feeds_a_reference_at_a_time_and_languages_within_one_reference(plan):
    feed = plan.interleaved(stratified=True, grouped=True)
    where = _placed(plan)
    runs = [where[feed[0]][2]]
    for before, now in zip(feed, feed[1:], strict=False):
        if where[now][2] != where[before][2]:
            runs.append(where[now][2])
    assert len(runs) == len({(w[0], w[2]) for w in where.values()})  # each reference's items together
    langs = {w[0] for w in where.values()}
    for n in range(1, len(feed)):
        refs = Counter(lang for lang, _ in {(where[i][0], where[i][2]) for i in feed[:n]})
        counts = [refs.get(lang, 0) for lang in langs]
        assert max(counts) - min(counts) <= 1, n


def test_every_cell_takes_the_references_in_one_order(plan):
    """A prefix judges the same references under every perturbation (a paired comparison)."""
    where = _placed(plan)
    for lang in {w[0] for w in where.values()}:
        orders = [list(dict.fromkeys(where[iid][2] for iid in ids))
                  for cell, ids in plan.stopping_cells(per_perturbation=True).items() if cell.startswith(f"{lang}/")]
        assert len(orders) == len(PERTURBATIONS)
        for a in orders:  # the references two cells share, in one order (a no-op leaves one out)
            for b in orders:
                assert [r for r in a if r in b] == [r for r in b if r in a], lang


@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("window", [50_000, 37])
def test_the_engine_s_items_come_in_the_feed_s_order_whatever_the_window(plan, grouped, window, monkeypatch):
    """``ordered`` yields the plan's items in ``interleaved`` order, a window of places per pass."""
    monkeypatch.setattr(Plan, "ORDER_WINDOW", window)
    fed = [item.item_id for item in plan.ordered(grouped=grouped)._shuffled_items()]
    assert fed == list(plan.interleaved(stratified=True, grouped=grouped))


def test_item_ids_packed_read_back_as_written_and_key_as_strs_do():
    import hashlib

    import numpy as np

    from babelrun.core.keys import ItemIds, item_bits, plan_keys

    ids = [hashlib.blake2b(str(i).encode(), digest_size=10).hexdigest() for i in range(300)]
    ids += ["pairs-not-hex-id", "ABCDEF0123456789ABCD", "0" * 20]  # the first two kept apart, not hexdigest-like
    packed = ItemIds(ids)
    assert len(packed) == len(ids) and list(packed) == ids and packed == ids and ids == packed
    assert packed[3] == ids[3] and packed[-2] == ids[-2] and packed[10:20] == ids[10:20]
    assert (packed.bits() == np.array([item_bits(i) for i in ids], dtype=np.uint64)).all()
    assert (plan_keys(packed) == plan_keys(ids)).all()
    with pytest.raises(IndexError):
        packed[len(ids)]


def test_an_id_twice_in_the_order_takes_its_last_place():
    """The feed's places match the plan's items to the order by key bits; an id that stands
    twice takes the last of its places (as a dict built over the order gave it)."""
    from babelrun.core.keys import ItemIds
    from babelrun.plan import _places

    a, b, c = "a" * 20, "b" * 20, "c" * 20
    assert _places(ItemIds([a, b, c, a]), ItemIds([c, a, b, a])).tolist() == [3, 2, 0, 3]
    with pytest.raises(KeyError):
        _places(ItemIds([a, "d" * 20]), ItemIds([a, b]))

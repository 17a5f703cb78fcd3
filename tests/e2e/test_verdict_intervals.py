"""Verdicts that follow R's interval (pass / fail / uncertain), how early stopping shows in the
outputs, two-order metrics that leave one-order items out, and budgets spread over every cell."""

from __future__ import annotations

from collections import Counter

import msgspec
import pytest

from babelrun.score.stats import Interval
from babelrun.score.verdict import DEPLOY_R, against_bar, items_to_decide
from helpers import quiet_audit, simulated, write_manifest

FOUR = {"sources": [{"kind": "bundled"}], "languages": ["en", "hi", "sw", "zh"], "references_per_language": 10}
PRICE = {"input_per_mtok": 2.5, "output_per_mtok": 10}


@pytest.mark.parametrize(("iv", "expected"), [
    (Interval(0.70, 0.65, 0.75, 100), "pass"),        # the lower bound on the bar: pass
    (Interval(0.70, 0.64, 0.75, 100), "uncertain"),
    (Interval(0.60, 0.50, 0.6499, 100), "fail"),
    (Interval(0.60, 0.50, 0.65, 100), "uncertain"),   # the upper bound on the bar: not below it
    (Interval(0.70, None, None, 100), "pass"),        # no interval (no bootstrap): the point decides
])
def test_verdict_follows_the_interval(iv, expected):
    assert against_bar(iv) == expected


def test_items_to_decide_shrinks_the_facing_side_to_the_distance():
    # R 0.70, 0.10 from R to the lower bound, 0.05 from the bar: (0.10 / 0.05)² = 4 × the items
    assert items_to_decide(Interval(0.70, 0.60, 0.75, 100), 100) == 400
    assert items_to_decide(Interval(0.60, 0.55, 0.70, 100), 100) == 400  # below: the upper side
    assert items_to_decide(Interval(0.80, 0.70, 0.90, 100), 100) is None  # decided already
    assert items_to_decide(Interval(DEPLOY_R, 0.6, 0.7, 100), 100) is None  # on the bar: no number decides


def _cards(cards):
    for jc in cards.judges:
        yield jc.overall
        for lc in jc.languages:
            yield lc.card
            yield from (pc.card for pc in lc.perturbations)


def test_a_panel_near_the_bar_gets_verdicts_its_intervals_allow(tmp_path):
    judges = [simulated(f"a{round(a * 100)}", default_accuracy=a) for a in (0.62, 0.66, 0.70, 0.74, 0.80, 0.90)]
    corpus = {**FOUR, "languages": ["en", "sw", "hi"]}
    result = quiet_audit({"judges": judges, "corpus": corpus, "scoring": {"bootstrap": 200}}, folder=tmp_path,
                         expect_exit=0)
    verdicts: Counter[str] = Counter()
    for card in _cards(result.cards):
        if card.verdict in ("pass", "fail", "uncertain"):
            verdicts[card.verdict] += 1
            assert card.verdict == against_bar(card.reliability), card
    print(dict(verdicts))
    assert verdicts["uncertain"] >= 1 and verdicts["pass"] >= 1 and verdicts["fail"] >= 1
    report = (tmp_path / "run" / "report.md").read_text()
    assert "?: uncertain" in report and " ? |" in report and "items would decide it" in report


def test_an_item_judged_in_one_order_stays_out_of_position_bias(tmp_path):
    # 7 keys: three items in both orders, a fourth in one: an always-right judge has Δ 0, R 1
    path = write_manifest(tmp_path, [simulated("right", default_accuracy=1.0)],
                          corpus={**FOUR, "languages": ["en"]}, scoring={"bootstrap": 0})
    result = quiet_audit(path, limit=7)
    card = result.cards.judges[0].overall
    assert card.presentations == 7 and card.items == 4
    assert card.position_bias.value == 0.0 and card.reliability.value == 1.0 and card.accuracy.value == 1.0


def test_a_rerun_after_stopping_does_not_warn_of_keys_not_needed(tmp_path, capsys):
    from babelrun.app.cli import main

    # a bar far under a right judge's R: its cells stop soon after min_items
    stopping = {"on": "verdict", "confidence": 0.95, "min_items": 30, "threshold": 0.3}
    path = write_manifest(tmp_path, [simulated("good", default_accuracy=1.0)],
                          corpus={**FOUR, "languages": ["en", "sw"]}, stopping=stopping)
    assert main(["audit", str(path)]) == 0
    first = capsys.readouterr()
    assert main(["audit", str(path)]) == 0
    again = capsys.readouterr()
    cards = msgspec.json.decode((tmp_path / "run" / "cards.json").read_bytes())
    stopped = [lc["card"]["stopped"] for lc in cards["judges"][0]["languages"] if "stopped" in lc["card"]]
    assert stopped, "the cell did not stop: the test needs a stopped card"
    for out in (first, again):
        assert "have no verdict" not in out.err + out.out
    assert "stopped early" in again.out
    report = (tmp_path / "run" / "report.md").read_text()
    assert f"{stopped[0]}: its interval holds at every n" in report


def _spend(result) -> dict[str, float]:
    return {j.judge: j.spend["total"] for j in result.stats.judges}


def test_a_budget_spreads_over_every_cell_and_the_estimate_is_near_the_spend(tmp_path):
    import babelrun
    from babelrun.app import estimate
    from babelrun.plan import Plan

    judges = [{**simulated("cheap", default_accuracy=0.9), "price": PRICE},
              {**simulated("dear", default_accuracy=0.8), "price": {"input_per_mtok": 5, "output_per_mtok": 20}}]
    (tmp_path / "full").mkdir()
    full_path = write_manifest(tmp_path / "full", judges, corpus=FOUR, scoring={"bootstrap": 0})
    manifest = babelrun.load_manifest(full_path)
    guessed = {e.judge: e.cost for e in estimate.estimate(manifest, Plan.from_manifest(manifest))}
    full = _spend(quiet_audit(manifest, expect_exit=0))
    for name, spent in full.items():
        print(f"{name}: estimated {guessed[name]} USD, spent {spent:.4f} (ratio {guessed[name] / spent:.2f})")
        assert spent / 1.5 <= guessed[name] <= spent * 1.5

    budget = min(full.values()) / 4
    (tmp_path / "quarter").mkdir()
    path = write_manifest(tmp_path / "quarter", judges, corpus=FOUR, scoring={"bootstrap": 0})
    result = quiet_audit(path, budget=budget)
    assert result.exit_code == 1 and any("budget" in s for s in result.stop_reasons)
    table = babelrun.load_run(tmp_path / "quarter" / "run", ["judge", "lang", "perturbation", "item_id"])
    rows = set(zip(*(table[c].to_pylist() for c in ("judge", "lang", "perturbation", "item_id")), strict=True))
    by_lang = Counter((j, lang) for j, lang, _, _ in rows)
    by_cell = Counter((j, lang, p) for j, lang, p, _ in rows)
    print(dict(by_lang))
    assert len(by_lang) == 8  # every (judge, language) reached
    for judge in ("cheap", "dear"):
        langs = [n for (j, _), n in by_lang.items() if j == judge]
        cells = [n for (j, _, _), n in by_cell.items() if j == judge]
        assert max(langs) - min(langs) <= 1, (judge, langs)  # languages within one item
        # each (language, perturbation) cell within about one item of the others (a cell is
        # one item ahead inside its language, and its language one item ahead of the rest)
        assert max(cells) - min(cells) <= 2, (judge, sorted(cells))
    # the report says how far each language got
    report = (tmp_path / "quarter" / "run" / "report.md").read_text()
    planned = {row.lang: 0 for row in result.cards.perturbation_audit}
    for row in result.cards.perturbation_audit:
        planned[row.lang] += row.emitted
    for jc in result.cards.judges:
        for lc in jc.languages:
            assert f"judged {lc.card.items} of {planned[lc.lang]} planned items" in report, lc.lang

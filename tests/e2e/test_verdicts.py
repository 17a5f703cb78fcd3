"""What a card may claim: the below-chance flag, the minimum-items rule, family
separation (degradation / labelled pairs / agentic), not-judged rows for every planned
language, an empty plan refused, and the report of a run with only one family.

Real audits with the simulated judge over real files; each assertion would fail if the
cards or the report overstated.
"""

from __future__ import annotations

import json
import re

import msgspec

from babelrun.app.cli import main
from babelrun.score.verdict import MIN_ITEMS
from helpers import quiet_audit, simulated, write_manifest


def _cards(tmp_path) -> dict:
    return json.loads((tmp_path / "run" / "cards.json").read_bytes())


def test_a_judge_that_prefers_the_degraded_answer_is_flagged_below_chance(tmp_path):
    # Wrong 90% of the time in both orders: consistent (κ_ord high) and worse than a coin.
    path = write_manifest(tmp_path, [simulated("contrarian", default_accuracy=0.1),
                                     simulated("fair", default_accuracy=0.9)],
                          corpus={"sources": [{"kind": "bundled"}], "languages": ["en", "fr"],
                                  "references_per_language": 12})
    cards = quiet_audit(path, expect_exit=0).cards
    by = {jc.judge: jc for jc in cards.judges}
    bad, good = by["contrarian"], by["fair"]
    assert bad.overall.accuracy.hi < 0.5 and bad.overall.below_chance
    assert bad.overall.order_consistency.value > 0.5  # consistent ...
    assert all(lc.card.below_chance for lc in bad.languages)  # ... and wrong, everywhere
    assert not good.overall.below_chance and not any(lc.card.below_chance for lc in good.languages)
    report = (tmp_path / "run" / "report.md").read_text()
    board = report.split("## Leaderboard")[1].split("\n## ")[0]
    row = next(line for line in board.splitlines() if "| contrarian |" in line)
    assert "below chance" in row
    assert "below chance" not in next(line for line in board.splitlines() if "| fair |" in line)
    advice = report.split("## Recommendations")[1].split("\n## ")[0]
    flagged = [line for line in advice.splitlines() if line.startswith("| ") and "prefers the degraded answer" in line]
    assert len(flagged) == 1 and flagged[0].startswith("| contrarian | do not use it here")  # one line per action
    assert flagged[0].endswith("| 2 | fr 0.12, en 0.15 |")  # its two languages, each with its accuracy
    assert "(consistently wrong)" in report.split("## Judge `contrarian`")[1]
    html = (tmp_path / "run" / "report.html").read_text()
    assert "below chance" in html and "prefers the degraded answer" in html


def test_a_card_with_too_few_items_shows_numbers_but_no_verdict(tmp_path):
    path = write_manifest(tmp_path, [simulated(default_accuracy=0.95)],
                          corpus={"sources": [{"kind": "bundled"}], "languages": ["en", "hi"],
                                  "references_per_language": 2})
    cards = quiet_audit(path, expect_exit=0).cards
    (judge,) = cards.judges
    for lc in judge.languages:
        assert lc.card.items < MIN_ITEMS
        assert lc.card.verdict == "too few items"
        assert lc.card.reliability.value is not None  # the numbers stay
    report = (tmp_path / "run" / "report.md").read_text()
    rows = [line for line in report.splitlines() if line.startswith(("| en (English)", "| hi (Hindi)"))]
    assert rows and all("(too few items)" in r and "✓" not in r and "✗" not in r for r in rows)


def _llmbar(folder, n: int = 40) -> str:
    data = [{"input": f"Question {i}?", "output_1": f"Good answer {i}.", "output_2": f"Bad answer {i}.",
             "label": 1 if i % 2 else 2} for i in range(n)]
    for d in data:  # the better output is the one the label names
        if d["label"] == 2:
            d["output_1"], d["output_2"] = d["output_2"], d["output_1"]
    (folder / "Natural").mkdir(parents=True)
    (folder / "Natural" / "dataset.json").write_text(json.dumps(data))
    return str(folder)


def test_labelled_pairs_never_pool_into_a_language_card(tmp_path):
    pairs = _llmbar(tmp_path / "llmbar")
    path = write_manifest(tmp_path, [simulated(default_accuracy=0.9)],
                          corpus={"sources": [{"kind": "bundled"}, {"kind": "labelled_pairs", "path": pairs}],
                                  "languages": ["en", "fr"], "references_per_language": 6})
    cards = quiet_audit(path, expect_exit=0).cards
    plan = json.loads((tmp_path / "run" / "plan.json").read_bytes())
    degradation_en = sum(r["emitted"] for r in plan["perturbation_audit"]
                         if r["lang"] == "en" and not r["perturbation"].startswith("pairs:"))
    (judge,) = cards.judges
    en = next(lc for lc in judge.languages if lc.lang == "en")
    assert en.card.items == degradation_en  # 40 labelled pairs are not in it
    assert not any(p.perturbation.startswith("pairs:") for lc in judge.languages for p in lc.perturbations)
    (family,) = cards.pairs
    assert family.family == "pairs:Natural"
    (pair_judge,) = family.judges
    assert pair_judge.overall.items == 40 and [lc.lang for lc in pair_judge.languages] == ["en"]
    board = (tmp_path / "run" / "report.md").read_text().split("## Leaderboard")[1].split("\n## ")[0]
    families = [line.split(" | ")[1] for line in board.splitlines()
                if line.startswith("| 1 ") or line.startswith("| 2 ")]
    assert families == ["degradation", "pairs:Natural"]


def test_every_planned_language_has_a_card_or_a_reason_and_an_empty_plan_is_refused(tmp_path, capsys):
    # fr: one short sentence per reference, no digits, no names: every perturbation is a
    # no-op, and the segmentation is weak. It must not vanish from cards.json or the report.
    lines = [{"id": f"en{i}", "language": "en", "prompt": "Q?",
              "reference": f"Paris has {i + 3} bridges. The Seine crosses it. Lyon is south of it."}
             for i in range(12)]
    lines += [{"id": f"fr{i}", "language": "fr", "prompt": "Q ?", "reference": "il fait beau"} for i in range(5)]
    (tmp_path / "refs.jsonl").write_text("\n".join(json.dumps(x) for x in lines))
    source = {"kind": "jsonl", "path": "refs.jsonl"}
    path = write_manifest(tmp_path, [simulated()], corpus={"sources": [source], "references_per_language": 12})
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "segmentation weak: fr (1.00 sentences per unit over 5 units)" in out
    assert "not judged: fr: no items" in out
    quiet_audit(path, expect_exit=0)
    cards = _cards(tmp_path)
    assert [lc["lang"] for lc in cards["judges"][0]["languages"]] == ["en"]
    (missing,) = cards["not_judged"]
    assert (missing["lang"], missing["family"], missing["judge"]) == ("fr", "degradation", None)
    assert missing["reason"].startswith("no items: segmentation weak (1.00 sentences per unit)")
    assert {s["lang"]: s["weak"] for s in cards["segmentation"]} == {"en": False, "fr": True}
    report = (tmp_path / "run" / "report.md").read_text()
    assert "| fr (French) | 0 | not judged: no items: segmentation weak" in report
    board = report.split("## Leaderboard")[1].split("\n## ")[0]
    assert "| 0/2 | 1 |" in board  # below 0.65: 0 of the 2 planned languages; 1 not judged
    assert "not judged: no items" in (tmp_path / "run" / "report.html").read_text()
    # Only fr: nothing to judge at all — exit 2 with the reason, before anything is written.
    only_fr = write_manifest(tmp_path, [simulated()], output_dir="empty",
                             corpus={"sources": [source], "languages": ["fr"]})
    assert main(["validate", str(only_fr)]) == 2
    err = capsys.readouterr().err
    assert "corpus: the plan has no items: every perturbation was a no-op on 5 references" in err
    assert "segmentation weak in: fr" in err
    assert main(["audit", str(only_fr)]) == 2 and not (tmp_path / "empty").exists()


def test_an_agentic_only_run_reports_its_cards(tmp_path):
    # No text source: the leaderboard, the recommendations and the cards are the agentic
    # family's, and a weak R_agent is advised on (not "every card is within the thresholds").
    path = write_manifest(tmp_path, [simulated(default_accuracy=0.55)],
                          corpus={"sources": [{"kind": "trajectories"}], "languages": ["en", "es"],
                                  "references_per_language": 8},
                          agentic={"focus": "tool_calls"})
    result = quiet_audit(path, expect_exit=0)
    assert not result.cards.judges and result.cards.agentic
    (judge,) = result.cards.agentic
    assert judge.overall.reliability.value < 0.65
    report = (tmp_path / "run" / "report.md").read_text()
    assert "No judge has counted records yet" not in report
    board = report.split("## Leaderboard")[1].split("\n## ")[0]
    assert "| 1 | agentic | sim |" in board
    advice = report.split("## Recommendations")[1].split("\n## ")[0]
    assert "every card is within the thresholds" not in advice
    assert re.search(r"\| sim \| route to another judge.*en \(agentic\) 0\.\d\d", advice)
    html = (tmp_path / "run" / "report.html").read_text()
    assert "No judge has counted records yet" not in html and "<td>agentic</td>" in html
    assert msgspec.json.decode((tmp_path / "run" / "cards.json").read_bytes())["not_judged"] == []


def test_a_pairs_only_run_reports_its_cards(tmp_path):
    pairs = _llmbar(tmp_path / "llmbar")
    path = write_manifest(tmp_path, [simulated(default_accuracy=0.9)],
                          corpus={"sources": [{"kind": "labelled_pairs", "path": pairs}]})
    result = quiet_audit(path, expect_exit=0)
    assert not result.cards.judges and [f.family for f in result.cards.pairs] == ["pairs:Natural"]
    report = (tmp_path / "run" / "report.md").read_text()
    assert "| 1 | pairs:Natural | sim |" in report
    assert "## Judge `sim`" in report and "labelled pairs `Natural`" in report
    assert "Natural" in (tmp_path / "run" / "report.html").read_text()

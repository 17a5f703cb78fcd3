"""Agreement with human labels (``babelrun.analyses.agree``), drift between two runs
(``babelrun.analyses.drift``), and the small statistics both rest on, each checked against an
independent implementation (scikit-learn, statsmodels: test-only dependencies)."""

import json
import re

import pytest

from babelrun.analyses import agree, drift
from babelrun.errors import UserError
from babelrun.score import paired
from babelrun.score.stats import landis_koch
from babelrun.store import log
from babelrun.testing import FakeJudgeServer
from helpers import SHARED_DATA, quiet_audit, simulated, write_manifest

LLMBAR = SHARED_DATA / "llmbar"
needs_llmbar = pytest.mark.skipif(not LLMBAR.exists(), reason="shared LLMBar data absent")
PAIRS_PER_SET = 20


# ---------------------------------------------------------------- statistics


# ---------------------------------------------------------------- agree

@pytest.fixture(scope="module")
def pairs_run(tmp_path_factory):
    """Two simulated judges on 20 pairs of every LLMBar set: biased enough that the orders,
    ties and invalid replies all show."""
    if not LLMBAR.exists():
        pytest.skip("shared LLMBar data absent")
    folder = tmp_path_factory.mktemp("pairs")
    path = write_manifest(folder, [
        simulated("sim", default_accuracy=0.8, position_bias=0.2, tie_rate=0.05, invalid_rate=0.05),
        simulated("strict", default_accuracy=0.95),
    ], corpus={"sources": [{"kind": "labelled_pairs", "path": str(LLMBAR),
                            "pairs_per_set": PAIRS_PER_SET}], "languages": ["en"]})
    quiet_audit(path, expect_exit=0)
    return folder / "run"


def _data_labels():
    """The LLMBar rows by pair id, read here with json (not through babelrun)."""
    return {f"{d.name}-{i:04d}": row for d in sorted(LLMBAR.iterdir()) if (d / "dataset.json").exists()
            for i, row in enumerate(json.loads((d / "dataset.json").read_text()))}


def _expected(run_dir, human: dict[str, int]):
    """By hand from the log: for each (judge, set), the four views as (choices, human labels)
    in the data's numbering; a tie or invalid reply keeps its own name, "split" marks an
    item whose two verdicts differ."""
    rows = _data_labels()
    out = {}
    for r in log.read(run_dir):
        if r.ref_id not in human:
            continue
        gold = rows[r.ref_id]["label"]
        choice = {"reference": str(gold), "perturbed": str(3 - gold)}.get(r.verdict, r.verdict)
        views = out.setdefault((r.judge, r.perturbation.removeprefix("pairs:")), {})
        views.setdefault(r.order, []).append((r.item_id, choice, str(human[r.ref_id])))
    result = {}
    for key, views in out.items():
        first = {item: (c, h) for item, c, h in views["ref_first"]}
        both = [(c if c == first[item][0] else "split", h)
                for item, c, h in views["pert_first"] if item in first]
        two = [(first[item][0], c, h) for item, c, h in views["pert_first"] if item in first]
        result[key] = {"both orders": both,
                       "two orders: both": [(_mt_bench(x, y), h) for x, y, h in two],
                       "two orders: votes": [(_votes(x, y), h) for x, y, h in two],
                       "ref_first": [(c, h) for _, c, h in views["ref_first"]],
                       "pert_first": [(c, h) for _, c, h in views["pert_first"]],
                       "presentations": [(c, h) for v in views.values() for _, c, h in v]}
    return result


def _mt_bench(x: str, y: str) -> str:
    """A win needs both orders, otherwise a tie; an invalid reply leaves the other order's."""
    return x if x == y else y if x == "invalid" else x if y == "invalid" else "tie"


def _votes(x: str, y: str) -> str:
    """JudgeBench's counter: +1 for each order naming output 1, −1 for output 2."""
    count = sum((v == "1") - (v == "2") for v in (x, y))
    return "1" if count > 0 else "2" if count < 0 else "invalid" if x == y == "invalid" else "tie"


def _check(figure, cases):
    from sklearn.metrics import cohen_kappa_score
    from statsmodels.stats.proportion import proportion_confint

    choices, humans = zip(*cases, strict=True)
    k, n = sum(c == h for c, h in cases), len(cases)
    lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
    kappa = cohen_kappa_score(choices, humans)
    assert (figure.n, figure.agree) == (n, k)
    assert figure.accuracy == pytest.approx(k / n)
    assert (figure.lo, figure.hi) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))
    assert figure.kappa == pytest.approx(kappa, abs=1e-12)
    assert figure.band == landis_koch(round(kappa, 12))  # κ = 0.2 exactly occurs here: slight


def _figures(agreement):
    return {(j.judge, s.set): {f.view: f for f in s.figures} for j in agreement.judges for s in j.sets}


@needs_llmbar
def test_agree_with_the_llmbar_labels_matches_a_hand_computation(pairs_run):
    labels = {pid: row["label"] for pid, row in _data_labels().items()}
    result = agree.run(pairs_run, LLMBAR)
    judged = {r.ref_id for r in log.read(pairs_run)}
    n_sets = len({pid.rsplit("-", 1)[0] for pid in labels})
    assert len(judged) == n_sets * PAIRS_PER_SET
    assert (result.labels_read, result.matched, result.unlabelled) == (len(labels), len(judged), 0)
    assert result.unknown.count == result.mismatched.count == 0
    assert result.no_records.count == len(labels) - len(judged)

    expected = _expected(pairs_run, {pid: labels[pid] for pid in judged})
    figures = _figures(result)
    assert set(figures) == set(expected) | {("sim", agree.ALL_SETS), ("strict", agree.ALL_SETS)}
    for key, views in expected.items():
        assert list(figures[key]) == list(agree.VIEWS)
        for view, cases in views.items():
            _check(figures[key][view], cases)
        both = views["both orders"]
        consistency = next(s.consistency for j in result.judges for s in j.sets if (j.judge, s.set) == key)
        same = sum(c not in ("split", "invalid") for c, _ in both)
        assert (consistency.items, consistency.same_verdict) == (len(both), same)
        assert consistency.decision == sum(c in ("1", "2") for c, _ in both)  # no tie-labelled pair here
        outcomes = figures[key]["both orders"].outcomes
        assert outcomes["both"] == figures[key]["both orders"].agree and sum(outcomes.values()) == len(both)
        assert figures[key]["two orders: votes"].outcomes["more_for"] == figures[key]["two orders: votes"].agree
    # The labels are the data's gold: agreement is the share of "reference" verdicts.
    records = [r for r in log.read(pairs_run) if r.judge == "sim"]
    pooled = figures[("sim", agree.ALL_SETS)]["presentations"]
    assert pooled.agree == sum(r.verdict == "reference" for r in records)
    assert pooled.n == len(records) == 2 * len(judged)
    out = agree.text(result)
    band = "(poor|slight|fair|moderate|substantial|almost perfect)"
    assert re.search(rf"acc \d\.\d\d \[\d\.\d\d, \d\.\d\d\], κ -?\d\.\d\d \[[^\]]*\] \({band}\), "
                     rf"n {PAIRS_PER_SET}, both orders", out)
    assert f"labels with no records in the run: {result.no_records.count}" in out


@needs_llmbar
def test_agree_with_a_csv_reports_unknown_and_unjudged_items(pairs_run, tmp_path):
    rows = _data_labels()
    judged = sorted({r.ref_id for r in log.read(pairs_run) if r.ref_id.startswith("LLMBar_Natural-")})
    unjudged = next(pid for pid in rows if pid.startswith("LLMBar_Natural-") and pid not in judged)
    # The first ten judged pairs: people disagree with the data on every third.
    human = {pid: (3 - rows[pid]["label"]) if i % 3 == 0 else rows[pid]["label"]
             for i, pid in enumerate(judged[:10])}
    lines = [f"{pid},{label}" for pid, label in human.items()] + ["nope-0001,1", f"{unjudged},2"]
    (tmp_path / "labels.csv").write_text("item,label\n" + "\n".join(lines) + "\n")

    result = agree.run(pairs_run, tmp_path / "labels.csv")
    assert (result.labels_read, result.matched) == (12, 10)
    assert (result.unknown.count, result.unknown.examples) == (1, ["nope-0001"])
    assert (result.no_records.count, result.no_records.examples) == (1, [unjudged])
    assert result.unlabelled == len({r.ref_id for r in log.read(pairs_run)}) - 10
    figures = _figures(result)
    assert set(figures) == {("sim", "LLMBar_Natural"), ("strict", "LLMBar_Natural")}
    for key, views in _expected(pairs_run, human).items():
        for view, cases in views.items():
            _check(figures[key][view], cases)
    assert "unknown items (no labelled pair of the run): 1 (nope-0001)" in agree.text(result)

    (tmp_path / "bad.csv").write_text("item,label\nLLMBar_Natural-0000,3\n")  # tie is a label; 3 is none
    with pytest.raises(UserError, match="bad.csv:2"):
        agree.run(pairs_run, tmp_path / "bad.csv")


@needs_llmbar
def test_agree_renumbers_a_labels_file_that_lists_outputs_the_other_way(pairs_run, tmp_path):
    raw = json.loads((LLMBAR / "LLMBar_Natural" / "dataset.json").read_text())
    swapped = [{**row, "output_1": row["output_2"], "output_2": row["output_1"], "label": 3 - row["label"]}
               for row in raw]
    judged = {r.ref_id for r in log.read(pairs_run)}
    edited = next(i for i in range(len(raw)) if f"LLMBar_Natural-{i:04d}" not in judged)
    swapped[edited]["output_1"] += " (edited)"  # no longer the run's pair
    (tmp_path / "LLMBar_Natural").mkdir()
    (tmp_path / "LLMBar_Natural" / "dataset.json").write_text(json.dumps(swapped))

    result = agree.run(pairs_run, tmp_path)
    reference = agree.run(pairs_run, LLMBAR / "LLMBar_Natural" / "dataset.json")
    assert (result.mismatched.count, result.mismatched.examples) == (1, [f"LLMBar_Natural-{edited:04d}"])
    assert result.no_records.count == reference.no_records.count - 1
    assert _figures(result) == _figures(reference)  # the same labels, renumbered: the same figures


# ---------------------------------------------------------------- drift

# Run B's judge differs from A's only in its Swahili accuracy (0.85 → 0.45); the judges
# share their name. The knob enters the judge id, which seeds the simulated judge, so every
# language's verdicts are redrawn: en and hi differ by chance only. With ~100 items a
# language, the fixed manifest seed and drift's default seed, the intervals below hold
# deterministically (en −0.045…+0.120, hi −0.066…+0.076, sw −0.430…−0.265 when written).
def _drift_manifest(folder, **knobs):
    folder.mkdir()
    return write_manifest(folder, [simulated("sim", default_accuracy=0.85, position_bias=0.1, **knobs)],
                          corpus={"sources": [{"kind": "bundled"}], "languages": ["en", "sw", "hi"]})


@pytest.fixture(scope="module")
def drift_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("drift")
    quiet_audit(_drift_manifest(root / "a"), expect_exit=0)
    quiet_audit(_drift_manifest(root / "b", accuracy={"sw": 0.45}), expect_exit=0)
    return root / "a" / "run", root / "b" / "run"


def test_drift_finds_the_changed_language_and_only_it(drift_runs):
    result = drift.run(*drift_runs)
    assert result.unmatched == []
    (pair,) = result.judges
    assert pair.judge_a == pair.judge_b == "sim" and pair.judge_id_a != pair.judge_id_b
    assert pair.only_a == pair.only_b == 0 and pair.matched == pair.overall.presentations
    assert not pair.served.changed and pair.served.model_a == pair.served.model_b == ["simulated"]
    by_lang = {d.lang: d for d in pair.languages}
    assert set(by_lang) == {"en", "sw", "hi"}
    acc = {lang: next(c for c in d.changes if c.metric == "accuracy") for lang, d in by_lang.items()}
    assert acc["sw"].delta < 0 and acc["sw"].hi < 0
    assert acc["sw"].delta == pytest.approx(acc["sw"].b.value - acc["sw"].a.value, abs=1e-4)
    for lang in ("en", "hi"):
        assert acc[lang].lo <= 0 <= acc[lang].hi
    assert by_lang["sw"].mcnemar.p < 1e-6 and by_lang["sw"].mcnemar.b > by_lang["sw"].mcnemar.c
    assert by_lang["en"].mcnemar.p > 0.05 and by_lang["hi"].mcnemar.p > 0.05
    assert [c.metric for c in pair.overall.changes] == list(paired.METRICS)
    assert drift.run(*drift_runs) == result  # seeded: the same runs give the same output
    assert "sw Swahili" in drift.text(result) and "!" not in drift.text(result)


def test_drift_of_a_run_against_itself_is_nothing(drift_runs):
    (pair,) = drift.run(drift_runs[0], drift_runs[0], replicates=200).judges
    for d in [pair.overall, *pair.languages]:
        assert (d.mcnemar.b, d.mcnemar.c, d.mcnemar.p) == (0, 0, 1.0)
        assert all(c.delta in (0.0, None) and c.lo in (0.0, None) and c.hi in (0.0, None)
                   for c in d.changes)


@needs_llmbar
def test_drift_says_which_judges_it_could_not_match(pairs_run, drift_runs):
    result = drift.run(pairs_run, drift_runs[0], replicates=50)
    assert "judge 'strict' is only in run A" in result.unmatched
    assert any("share no (item, order)" in note for note in result.unmatched)
    (pair,) = result.judges
    assert pair.matched == 0 and pair.overall is None


def test_drift_flags_a_changed_served_model(tmp_path, monkeypatch):
    monkeypatch.setenv("BABELRUN_TEST_KEY", "k")
    runs = []
    for model in ("judge-2024-07", "judge-2024-11"):
        folder = tmp_path / model
        folder.mkdir()
        with FakeJudgeServer(model=model) as server:
            judge = {"name": "remote", "backend": "openai", "model": "judge", "endpoint": server.url,
                     "api_key_env": "BABELRUN_TEST_KEY", "concurrency": 8}
            quiet_audit(write_manifest(folder, [judge], corpus={
                "sources": [{"kind": "bundled"}], "languages": ["en"], "references_per_language": 2}), expect_exit=0)
        runs.append(folder / "run")
    result = drift.run(*runs, replicates=100)
    (pair,) = result.judges
    assert pair.served.changed
    assert (pair.served.model_a, pair.served.model_b) == (["judge-2024-07"], ["judge-2024-11"])
    assert pair.matched > 0  # the same items; the fake judge answers by content alone
    assert pair.overall.mcnemar.p == 1.0
    out = drift.text(result)
    assert "! the provider reported another model or fingerprint" in out
    assert "judge-2024-07 → judge-2024-11" in out

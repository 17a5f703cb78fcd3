"""Mitigation judges (composites): each removes the bias it targets, at the price it states."""

import subprocess
import sys
from collections import Counter
from statistics import NormalDist

import msgspec
import pytest

import babelrun
from babelrun.errors import ManifestError
from babelrun.judges import judge_id
from babelrun.judges.prompt import TEMPLATES
from babelrun.score import composite
from babelrun.store import log
from babelrun.testing import FakeJudgeServer
from helpers import ROOT, kill_after_records, messages, quiet_audit, simulated, write_manifest

CORPUS = {"sources": [{"kind": "bundled"}], "references_per_language": 12}
PERTURBATIONS = [{"name": n, "severities": [0.3, 0.6]} for n in ("truncate", "shuffle", "repeat_pad")]


def _manifest(judges, composites) -> dict:
    return {"judges": judges, "composites": composites, "corpus": CORPUS, "perturbations": PERTURBATIONS}


def _named(cards):
    """The cards, each judge's and composite's overall card by name, each composite by name."""
    by_name = {j.judge: j.overall for j in cards.judges}
    return cards, by_name, {c.name: c for c in cards.composites}


def _contains_zero(iv):
    return iv.lo <= 0.0 <= iv.hi


def test_dual_order_brings_position_bias_to_zero(tmp_path):
    judges = [simulated("hard", position_bias=0.3, default_accuracy=0.8),
              {**simulated("soft", position_bias=0.4, default_accuracy=0.8), "soft": True}]
    composites = [{"kind": "dual_order", "name": "hard2", "of": "hard"},
                  {"kind": "dual_order", "name": "soft2", "of": "soft"}]
    _, card, comp = _named(quiet_audit(_manifest(judges, composites), folder=tmp_path).cards)
    for base, fixed in (("hard", "hard2"), ("soft", "soft2")):
        assert card[base].position_bias.lo > 0.15  # the bias is there, well outside noise
        assert _contains_zero(card[fixed].position_bias)
        assert abs(card[fixed].position_bias.value) < 0.02
        assert comp[fixed].calls_per_decision == 2.0
        assert comp[fixed].presentations == card[base].presentations
    # Hard verdicts that disagree across orders become ties: as many consistent items as
    # before, none of them wrongly decided by the slot. Soft verdicts settle them instead.
    assert card["hard2"].order_consistency.value == card["hard"].order_consistency.value
    assert card["hard2"].tie_rate.value > 0.2
    assert card["soft2"].order_consistency.value > card["soft"].order_consistency.hi
    assert card["soft2"].accuracy.value > card["soft"].accuracy.hi
    # The change is stated against the base on the same presentations, with an interval.
    delta = {c.metric: c for c in comp["hard2"].change[0].changes}["position_bias"]
    assert delta.hi < -0.2 and delta.a.value == card["hard"].position_bias.value


def test_calibrated_removes_most_of_a_known_slot_bias_on_held_out_items(tmp_path):
    bias = 0.4
    judges = [{**simulated("leaning", position_bias=bias, default_accuracy=0.8), "soft": True}]
    composites = [{"kind": "calibrated", "name": "cal", "of": "leaning", "calibration_share": 0.3}]
    cards, card, comp = _named(quiet_audit(_manifest(judges, composites), folder=tmp_path).cards)
    cal = comp["cal"]
    # The simulated soft judge's log-odds shift is Φ⁻¹((1 + bias)/2); the pooled estimate finds it.
    true_beta = NormalDist().inv_cdf((1 + bias) / 2)
    assert cal.slot_bias["all"] == pytest.approx(true_beta, abs=0.15)
    assert cal.calibration_items > 0
    # Held-out items are never scored: the scored items and the calibration items partition
    # the base judge's items.
    assert card["cal"].items + cal.calibration_items == card["leaning"].items
    base_delta = {c.metric: c for c in cal.change[0].changes}["position_bias"].a.value
    assert base_delta > 0.2
    assert abs(card["cal"].position_bias.value) < 0.25 * base_delta  # most of it removed
    assert card["cal"].position_bias.hi < card["leaning"].position_bias.lo
    assert cal.calls_per_decision == 1.0


def test_calibration_and_scored_items_are_disjoint():
    import numpy as np

    from babelrun.manifest import CalibratedSpec

    keys = np.sort(np.random.default_rng(0).integers(0, 1 << 60, 2000, dtype=np.uint64) << np.uint64(1))
    keys = np.sort(np.concatenate([keys, keys | np.uint64(1)]))
    probs = np.tile([0.6, 0.3, 0.1], (len(keys), 1))
    judged = composite._Judged(np.arange(len(keys)), keys, np.zeros(len(keys), dtype=np.int64), probs)
    spec = CalibratedSpec(name="c", of="j", calibration_share=0.25)
    out = composite.calibrated(spec, judged, np.zeros(len(keys), dtype=np.int64), ["en"])
    scored_items = set((keys[out.rows] >> np.uint64(1)).tolist())
    held_out = 2000 - len(scored_items)
    assert out.calibration_items == held_out
    assert 0.2 < held_out / 2000 < 0.3
    # Constant P(A) 0.6 / P(B) 0.3: β = log 2, and after it the two slots are equal.
    assert out.slot_bias["all"] == pytest.approx(np.log(2), abs=1e-3)
    assert np.allclose(out.probs[:, 0], out.probs[:, 1])


def test_ensemble_helps_when_errors_are_independent_and_not_when_identical(tmp_path):
    knobs = {"default_accuracy": 0.7}
    independent = [{**simulated(f"ind{i}", **knobs), "model": f"ind{i}"} for i in range(3)]
    copies = [{**simulated(f"copy{i}", **knobs, noise="shared"), "model": f"copy{i}"} for i in range(3)]
    composites = [{"kind": "ensemble", "name": "ind", "of": ["ind0", "ind1", "ind2"]},
                  {"kind": "ensemble", "name": "copies", "of": ["copy0", "copy1", "copy2"]}]
    _, card, comp = _named(quiet_audit(_manifest(independent + copies, composites), folder=tmp_path).cards)
    # Three independent judges at 0.7: the majority is right with 3p² − 2p³ = 0.784.
    for i in range(3):
        assert card["ind"].accuracy.lo > card[f"ind{i}"].accuracy.hi
    assert card["ind"].accuracy.value == pytest.approx(0.784, abs=0.03)
    # Copies with one noise source make the same errors: the vote adds nothing.
    assert card["copies"].accuracy.value == card["copy0"].accuracy.value
    assert comp["copies"].change[0].mcnemar.b == comp["copies"].change[0].mcnemar.c == 0
    assert comp["ind"].calls_per_decision == 3.0


def test_cascade_escalates_at_the_rate_its_threshold_implies(tmp_path):
    accuracy, margin = 0.8, 0.5
    judges = [{**simulated("cheap", default_accuracy=accuracy), "soft": True},
              simulated("strong", default_accuracy=0.98)]
    composites = [{"kind": "cascade", "name": "casc", "cheap": "cheap", "strong": "strong",
                   "margin": margin, "on_flip": False}]
    _, card, comp = _named(quiet_audit(_manifest(judges, composites), folder=tmp_path).cards)
    # The cheap judge's log-odds are ±μ + ε, ε ~ N(0, 1), μ = Φ⁻¹(accuracy); with no tie mass
    # |P(A) − P(B)| = |tanh(s/2)| < margin  ⇔  |s| < 2·atanh(margin).
    mu, c = NormalDist().inv_cdf(accuracy), 2 * __import__("math").atanh(margin)
    implied = NormalDist().cdf(c - mu) - NormalDist().cdf(-c - mu)
    rate = comp["casc"].escalation_rate
    assert rate.lo <= implied <= rate.hi, (rate, implied)
    assert comp["casc"].calls_per_decision == pytest.approx(1 + rate.value, abs=1e-3)
    assert card["casc"].accuracy.lo > card["cheap"].accuracy.hi


def test_prompt_variant_is_a_judge_setting_with_its_own_id():
    base = babelrun.judges.judge_spec(name="a", backend="openai", model="m")
    variant = msgspec.structs.replace(base, prompt="pairwise_length_neutral")
    assert judge_id(base) != judge_id(variant)
    system = messages("q", "a", "b", prompt="pairwise_length_neutral")[0]["content"]
    assert "Length is not quality" in system
    assert "Length is not quality" not in messages("q", "a", "b")[0]["content"]


@pytest.mark.parametrize("composite_spec, field, problem", [
    ({"kind": "dual_order", "name": "d", "of": "nobody"}, "composites[0].of", "no judge named 'nobody'"),
    ({"kind": "dual_order", "name": "a", "of": "a"}, "composites[0].name", "duplicate judge name"),
    ({"kind": "calibrated", "name": "c", "of": "a"}, "composites[0]", "must be a soft judge"),
    ({"kind": "ensemble", "name": "e", "of": ["a", "a"]}, "composites[0]", "must be distinct"),
    ({"kind": "ensemble", "name": "e", "of": ["a"]}, "composites[0].of", "length"),
    ({"kind": "cascade", "name": "k", "cheap": "a", "strong": "b", "margin": 0.2}, "composites[0]",
     "must be a soft judge"),
    ({"kind": "vote", "name": "v", "of": "a"}, "composites[0]", "kind"),
])
def test_bad_composites_are_named_by_field(tmp_path, composite_spec, field, problem):
    path = write_manifest(tmp_path, [simulated("a"), simulated("b", default_accuracy=0.8)], composites=[composite_spec])
    with pytest.raises(ManifestError) as e:
        babelrun.load_manifest(path)
    assert e.value.path.startswith(field) and problem in str(e.value), str(e.value)


def test_kill_and_resume_with_composites_makes_no_inner_call_twice(tmp_path):
    corpus = {"sources": [{"kind": "bundled"}], "languages": ["en", "hi"], "references_per_language": 3}
    perts = [{"name": "truncate", "severities": [0.6]}, {"name": "shuffle", "severities": [0.6]}]

    def manifest(folder, server):
        folder.mkdir()
        judges = [{"name": n, "backend": "openai", "model": n, "endpoint": server.url, "concurrency": 2}
                  for n in ("m1", "m2")]
        composites = [{"kind": "dual_order", "name": "d", "of": "m1"},
                      {"kind": "ensemble", "name": "e", "of": ["m1", "m2"]},
                      {"kind": "cascade", "name": "k", "cheap": "m1", "strong": "m2"}]
        return write_manifest(folder, judges, composites=composites, corpus=corpus, perturbations=perts)

    cmd = [sys.executable, "-m", "babelrun", "audit"]
    # 48 calls, 4 in flight, 0.1 s each: ~1.2 s of calls, time enough to kill the audit midway.
    with FakeJudgeServer(latency_s=0.1) as server:
        killed = manifest(tmp_path / "killed", server)
        run_dir = tmp_path / "killed" / "run"
        kill_after_records([*cmd, str(killed)], run_dir, 12)
        again = subprocess.run([*cmd, str(killed)], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr
        requests = server.requests
        clean = manifest(tmp_path / "clean", server)
        assert subprocess.run([*cmd, str(clean)], cwd=ROOT, capture_output=True, timeout=120).returncode == 0

    records = list(log.read(run_dir))
    per_key = Counter(r.key for r in records)
    assert max(per_key.values()) == 1  # every inner key judged once: none repeated on resume
    planned = len(per_key)
    assert requests - planned <= 2 * 2  # at most the calls in flight at the kill were lost
    assert {r.judge for r in records} == {"m1", "m2"}  # composites make no calls of their own
    killed_cards = msgspec.json.decode((run_dir / "cards.json").read_bytes())
    clean_cards = msgspec.json.decode((tmp_path / "clean" / "run" / "cards.json").read_bytes())
    assert [c["name"] for c in killed_cards["composites"]] == ["d", "e", "k"]
    assert killed_cards == clean_cards


def test_a_strong_judge_called_on_escalations_only_gives_the_same_cascade(tmp_path):
    def run(folder, calls):
        folder.mkdir()
        judges = [simulated("cheap", default_accuracy=0.75),
                  {**simulated("strong", default_accuracy=0.97), "calls": calls}]
        composites = [{"kind": "cascade", "name": "casc", "cheap": "cheap", "strong": "strong"}]
        path = write_manifest(folder, judges, composites=composites, corpus=CORPUS, perturbations=PERTURBATIONS)
        result = quiet_audit(path)
        return result, list(log.read(folder / "run"))

    full, full_records = run(tmp_path / "all", "all")
    lazy, lazy_records = run(tmp_path / "escalations", "escalations")
    casc = {c.name: c for c in lazy.cards.composites}["casc"]
    strong_calls = [r for r in lazy_records if r.judge == "strong"]
    # The strong judge answered exactly the escalated presentations, after the cheap judge.
    assert len(strong_calls) == round(casc.escalation_rate.value * casc.presentations)
    assert 0 < len(strong_calls) < len([r for r in lazy_records if r.judge == "cheap"])
    assert max(r.ts for r in lazy_records if r.judge == "cheap") <= min(r.ts for r in strong_calls)
    assert lazy.planned_calls == len(lazy_records)
    # Same verdicts where both asked: the cascade's card is the same; the strong judge, which
    # saw only the hard cases, has no card of its own.
    assert lazy.cards.composites == full.cards.composites
    assert [j.judge for j in lazy.cards.judges] == ["casc", "cheap"]
    lazy_cards = {j.judge: j for j in lazy.cards.judges}
    assert lazy_cards["casc"] == {j.judge: j for j in full.cards.judges}["casc"]
    # Run again: nothing left to ask.
    again = quiet_audit(tmp_path / "escalations" / "manifest.yaml")
    assert again.new_records == 0 and again.already_done == again.planned_calls


def test_escalation_only_judges_must_be_a_cascades_strong_judge(tmp_path):
    judges = [simulated("a"), {**simulated("b", default_accuracy=0.8), "calls": "escalations"}]
    path = write_manifest(tmp_path, judges)
    with pytest.raises(ManifestError) as e:
        babelrun.load_manifest(path)
    assert e.value.path == "judges[1].calls"
    path = write_manifest(tmp_path, judges, composites=[{"kind": "dual_order", "name": "d", "of": "b"}])
    with pytest.raises(ManifestError, match="only be a cascade's strong judge"):
        babelrun.load_manifest(path)


def test_escalation_only_judges_need_the_whole_run(tmp_path):
    from babelrun.errors import UserError
    from babelrun.store.log import Shard

    judges = [simulated("cheap"), {**simulated("strong", default_accuracy=0.95), "calls": "escalations"}]
    path = write_manifest(tmp_path, judges, corpus=CORPUS, perturbations=PERTURBATIONS,
                          composites=[{"kind": "cascade", "name": "k", "cheap": "cheap", "strong": "strong"}])
    with pytest.raises(UserError, match="escalations only"):
        quiet_audit(path, shard=Shard(0, 2))
    assert not (tmp_path / "run" / "log").exists()


def test_the_report_shows_mitigations_beside_their_base_and_agentic_cards(tmp_path):
    judges = [{**simulated("leaning", position_bias=0.4), "soft": True}]
    composites = [{"kind": "dual_order", "name": "leaning-2x", "of": "leaning"}]
    corpus = {"sources": [{"kind": "bundled"}, {"kind": "trajectories"}], "languages": ["en", "es"],
              "references_per_language": 3}
    path = write_manifest(tmp_path, judges, composites=composites, corpus=corpus,
                          perturbations=PERTURBATIONS[:1],
                          agentic={"perturbations": [{"name": "step_pad"}, {"name": "hallucinated_tool"}]})
    quiet_audit(path)
    page = (tmp_path / "run" / "report.html").read_text()
    section = page[page.index("Mitigations against their base judge"):]
    row = section[section.index("<td>leaning-2x</td>"):section.index("</tr>", section.index("<td>leaning-2x</td>"))]
    assert "<td>dual_order</td><td>leaning</td>" in row and "2.00" in row  # kind, base, calls per decision
    assert "<b>" in row  # the targeted metrics stand out
    assert "Agent trajectories" in page and "R_agent" in page
    markdown = (tmp_path / "run" / "report.md").read_text()
    assert ("## Mitigations against their base judge" in markdown
            and "| leaning-2x | dual_order | leaning | 2.00 |" in markdown)
    identities = page[page.index("Judge identities"):]
    assert "dual_order (composite)" in identities


def test_the_length_neutral_prompt_is_written_in_every_language_of_the_base_prompt():
    base, variant = TEMPLATES["pairwise"], TEMPLATES["pairwise_length_neutral"]
    assert set(variant.translations) == set(base.translations)
    for lang in ("es", "hi", "ja", "ar"):
        (system, user), (base_system, base_user) = variant.texts(lang), base.texts(lang)
        assert system.startswith(base_system) and len(system) > len(base_system) + 20 and user == base_user


def test_escalations_the_strong_judge_has_not_answered_still_count_in_the_rate():
    import numpy as np

    from babelrun.manifest import CascadeSpec

    keys = np.arange(8, dtype=np.uint64)  # four items, both orders
    verdict = np.array([0, 0, 0, 1, 2, 0, 3, 3])  # item 1 flips; a tie; an invalid pair
    cheap = composite._Judged(np.arange(8), keys, verdict, np.full((8, 3), np.nan))
    strong = composite._Judged(np.zeros(0, np.int64), np.zeros(0, np.uint64), np.zeros(0, np.int64),
                               np.zeros((0, 3)))
    out = composite.cascade(CascadeSpec(name="k", cheap="c", strong="s"), cheap, strong)
    # Escalated: the flipped item's two presentations, the tie, the two invalid ones = 5 of 8;
    # none answered, so only the three the cheap judge settles are decided.
    assert (out.escalated, out.considered, out.unresolved, len(out.rows)) == (5, 8, 5, 3)
    assert out.calls_per_decision == pytest.approx(2 + 5 / 8)

"""``samples: k``: each presentation asked k times, against a loopback judge whose verdict is a
function of the prompt and flips each request with probability 0.1 (``sample_flip``); and a
simulated pointwise judge whose samples' score noise is known."""

import json
import math
import statistics
import subprocess
import sys
from collections import Counter
from itertools import product
from statistics import NormalDist

import msgspec

import babelrun
from babelrun.app.cli import main
from babelrun.plan import Plan
from babelrun.score import decode
from babelrun.score.stats import Interval
from babelrun.store import log
from babelrun.testing import FakeJudgeServer
from helpers import ROOT, kill_after_records, simulated, write_manifest

CORPUS = {"sources": [{"kind": "bundled"}], "languages": ["en", "es", "fr", "sw"], "references_per_language": 10}
PERTURBATIONS = [{"name": n, "severities": [0.6]} for n in ("truncate", "shuffle", "number_corrupt", "repeat_pad")]
FLIP = 0.1


def _manifest(folder, server, **extra):
    folder.mkdir(parents=True, exist_ok=True)
    judge = {"name": "sampled", "backend": "openai", "model": "m", "endpoint": server.url, "concurrency": 4,
             "temperature": 0.7, "samples": 3, "seed": 7}
    return write_manifest(folder, [judge], corpus=CORPUS, perturbations=PERTURBATIONS, **extra)


def _audit(path):
    return [sys.executable, "-m", "babelrun", "audit", str(path), "--progress-every", "0.2"]


def _planned(path):
    m = babelrun.load_manifest(path)
    jid = babelrun.judges.judge_id(m.judges[0])
    keys = {(jid, iid, o) for iid in Plan.from_manifest(m).item_ids for o in ("ref_first", "pert_first")}
    return {k if s == 0 else (*k, s) for k in keys for s in range(3)}


def test_three_samples_are_three_requests_each_and_agree_as_the_flips_say(tmp_path):
    with FakeJudgeServer(sample_flip=FLIP) as server:
        path = _manifest(tmp_path, server, composites=[{"kind": "sampled", "name": "majority-of-3", "of": "sampled"}])
        done = subprocess.run(_audit(path), cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        prompts = Counter(server.prompts)
    planned = _planned(path)
    assert len(prompts) == len(planned) // 3  # one prompt per presentation …
    assert set(prompts.values()) == {3}  # … asked exactly three times
    records = list(log.read(tmp_path / "run"))
    assert Counter(r.sample for r in records) == {s: len(planned) // 3 for s in range(3)}
    assert {r.key for r in records} == planned
    assert {r.temperature for r in records} == {0.7} and len({r.seed for r in records}) > len(records) * 0.99
    judges = {j["judge"]: j for j in json.loads((tmp_path / "run" / "cards.json").read_text())["judges"]}
    card = judges["sampled"]["overall"]
    assert "self_consistency" not in judges["majority-of-3"]["overall"]  # one decision per presentation
    expected = (1 - FLIP) ** 2 + FLIP ** 2  # 0.82: two samples agree when neither or both flipped
    sc = card["self_consistency"]
    assert abs(sc["value"] - expected) <= 0.05, sc
    assert sc["lo"] <= sc["value"] <= sc["hi"] and sc["n"] == len(planned)  # 3 pairs per presentation
    for order in ("ref_first", "pert_first"):
        assert abs(card[f"self_consistency_{order}"]["value"] - expected) <= 0.07
    # every sample counts: the card's presentations are all the asks
    assert card["presentations"] == len(planned)
    # the majority of 3, audited beside its base's first asks: one decision per presentation
    cards = json.loads((tmp_path / "run" / "cards.json").read_text())
    (majority,) = cards["composites"]
    assert majority["kind"] == "sampled" and majority["calls_per_decision"] == 3
    assert majority["presentations"] == len(planned) // 3
    # a flip at 0.1 per ask survives the majority only where two of three flip (0.028): the base's
    # verdict is order-free, so κ_ord goes from about 0.82 (one ask) to about 0.95 (the majority)
    overall = majority["change"][0]
    assert overall["presentations"] == len(planned) // 3
    kappa = next(c for c in overall["changes"] if c["metric"] == "order_consistency")
    assert abs(kappa["a"]["value"] - 0.82) < 0.06 and abs(kappa["b"]["value"] - 0.945) < 0.04


def test_a_judge_asked_once_has_no_self_consistency(tmp_path):
    with FakeJudgeServer(sample_flip=FLIP) as server:
        path = write_manifest(tmp_path, [{"name": "once", "backend": "openai", "model": "m",
                                          "endpoint": server.url}],
                              corpus={**CORPUS, "references_per_language": 2}, perturbations=PERTURBATIONS[:1])
        done = subprocess.run(_audit(path), cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    card = json.loads((tmp_path / "run" / "cards.json").read_text())["judges"][0]["overall"]
    assert "self_consistency" not in card
    assert all("sample" not in json.loads(line) for seg in (tmp_path / "run" / "log").glob("*.jsonl")
               for line in seg.read_text().splitlines())


def test_sigkill_and_resume_with_samples_equals_an_uninterrupted_run(tmp_path):
    with FakeJudgeServer(sample_flip=FLIP, latency_s=0.01) as server:
        cache = {"dir": str(tmp_path / "cache"), "sampled": True}
        killed = _manifest(tmp_path / "killed", server, cache=cache)
        run_dir = tmp_path / "killed" / "run"
        kill_after_records(_audit(killed), run_dir, 200, poll_s=0.01)
        again = subprocess.run(_audit(killed), cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr
        clean = _manifest(tmp_path / "clean", server, cache={"dir": str(tmp_path / "cache2"), "sampled": True})
        whole = subprocess.run(_audit(clean), cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert whole.returncode == 0, whole.stderr
    planned = _planned(killed)
    ok = Counter(r.key for r in log.read(run_dir) if r.status == "ok")
    assert set(ok) == planned  # none lost
    assert max(ok.values()) == 1  # none duplicated
    reference = {r.key: (r.verdict, r.raw) for r in log.read(tmp_path / "clean" / "run")}
    assert {r.key: (r.verdict, r.raw) for r in log.read(run_dir)} == reference
    assert (run_dir / "cards.json").read_bytes() == (tmp_path / "clean" / "run" / "cards.json").read_bytes()


def _rounded_score_law(mean: float, noise: float, scale: tuple[int, int]) -> dict[int, float]:
    """P(score = v) for the simulated pointwise judge: round(mean + N(0, noise)), clipped."""
    lo, hi = scale
    cdf = NormalDist(mean, noise).cdf
    return {v: (1.0 if v == hi else cdf(v + 0.5)) - (0.0 if v == lo else cdf(v - 0.5)) for v in range(lo, hi + 1)}


def _expected_spread(law: dict[int, float], k: int) -> tuple[float, float]:
    """Two samples' chance of equal scores, and the mean sample SD (n − 1) of k samples."""
    equal = sum(p * p for p in law.values())
    sd = sum(math.prod(law[v] for v in draw) * statistics.stdev(draw) for draw in product(law, repeat=k))
    return equal, sd


def test_a_pointwise_judge_asked_three_times_shows_its_score_noise(tmp_path):
    """The simulated pointwise judge scores round(7 − 2·[degraded] + N(0, 0.8)) on 1–10: each
    sample draws afresh, so equal-score share and sample SD follow from the rounded normal law."""
    noise, k = 0.8, 3
    knobs = {"score_noise": noise, "score_drop": 2.0}
    judges = [{**simulated(name, **knobs, noise=name), "protocol": "pointwise", "prompt": "pointwise",
               "samples": samples} for name, samples in (("scorer-k3", k), ("scorer-once", 1))]
    path = write_manifest(tmp_path, judges, corpus={**CORPUS, "references_per_language": 12},
                          perturbations=PERTURBATIONS[:3], scoring={"bootstrap": 200})
    assert main(["audit", str(path)]) == 0
    cards = {jc.judge: jc for jc in decode((tmp_path / "run" / "cards.json").read_bytes()).pointwise}
    laws = [_rounded_score_law(mean, noise, (1, 10)) for mean in (7.0, 5.0)]  # reference, degraded
    spreads = [_expected_spread(law, k) for law in laws]
    equal, sd = (sum(s[i] for s in spreads) / 2 for i in (0, 1))  # every item has one of each
    card = cards["scorer-k3"].overall
    presentations = 2 * card.items
    for measured, expected in ((card.self_consistency, equal), (card.sample_sd, sd)):
        assert isinstance(measured, Interval)
        assert abs(measured.value - expected) <= 0.06, (measured, expected)
        assert measured.lo <= expected <= measured.hi, (measured, expected)  # the item-clustered interval
    assert card.self_consistency.n == presentations * k * (k - 1) // 2 and card.sample_sd.n == presentations
    assert all(isinstance(lc.card.self_consistency, Interval) for lc in cards["scorer-k3"].languages)
    once = cards["scorer-once"].overall
    assert once.self_consistency is msgspec.UNSET and once.sample_sd is msgspec.UNSET
    text = json.loads((tmp_path / "run" / "cards.json").read_text())
    assert "self_consistency" not in next(j for j in text["pointwise"] if j["judge"] == "scorer-once")["overall"]
    print(f"equal-score share: expected {equal:.4f}, measured {card.self_consistency.value} "
          f"[{card.self_consistency.lo}, {card.self_consistency.hi}]; sample SD: expected {sd:.4f}, "
          f"measured {card.sample_sd.value} [{card.sample_sd.lo}, {card.sample_sd.hi}]")


def test_a_sampled_judge_s_missing_samples_are_counted_as_missing_keys(tmp_path, capsys):
    """Every sample of a presentation is a planned key: a run stopped short (``--limit``) says
    how many of them have no verdict, samples included."""
    with FakeJudgeServer(sample_flip=FLIP) as server:
        path = _manifest(tmp_path, server)
        planned = len(_planned(path))
        assert main(["audit", str(path), "--limit", "30", "--progress-every", "3600"]) in (0, 1)
    err = capsys.readouterr().err
    assert f"{planned - 30} of {planned} planned key(s) have no verdict" in err, err

"""``samples: k``: each presentation asked k times, against a loopback judge whose verdict is a
function of the prompt and flips each request with probability 0.1 (``sample_flip``)."""

import json
import subprocess
import sys
from collections import Counter

import babelrun
from babelrun.plan import Plan
from babelrun.store import log
from babelrun.testing import FakeJudgeServer
from helpers import ROOT, kill_after_records, write_manifest

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

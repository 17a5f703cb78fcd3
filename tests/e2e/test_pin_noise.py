"""`pin` and `check` against a sampled judge: a loopback judge whose base verdict is a function
of the prompt and which answers each request the other way with probability 0.1 (seeded by the
prompt and how often it was asked, so the test is deterministic). `pin --manifest` measures its
self-flip rate; 10 checks of the unchanged judge: at most 1 alarms; after 30 % of its base
verdicts change (same model, same fingerprint), at least 9 of 10 checks exit 1.

Why 64 canary items (128 presentations a check): an unchanged judge flipping 0.1 of its
answers disagrees with a pinned answer at 2 · 0.1 · 0.9 = 0.18; after the change, a changed
presentation disagrees at 0.9² + 0.1² = 0.82, so a check flips at 0.7 · 0.18 + 0.3 · 0.82 =
0.372. The check's one-sided Fisher test (each of its two tests at alpha / 2 = 0.025) against
pin's 256 re-asks then alarms on 0.988 of changed checks and 0.018 of unchanged ones: simulated
over 1000 seeds of this design (``python bench/pin_power.py``), P(at most 1 of 10 unchanged
checks alarms) = 0.96 and P(at least 9 of 10 changed checks alarm) = 0.975 (at 48 canaries the
second is 0.88, at 24 only 0.45). This seed: self-flip 50 of 256 re-asks (0.195 [0.137,
0.250]), unchanged checks 0 of 10 alarms at a flip rate of 0.207, changed checks 10 of 10.
The same design asked ``samples: 3`` and pinned without --manifest takes the baseline from its
later samples, with no call: 44 of 256 (0.172 [0.121, 0.227]); 0 of 10 unchanged checks alarm,
10 of 10 changed ones. About 6000 loopback calls."""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from collections import Counter

import pytest

from babelrun.app import lockfile
from babelrun.app.cli import main
from babelrun.testing import FakeJudgeServer, choose
from helpers import write_manifest

KEY_ENV = "BABELRUN_PIN_NOISE_KEY"
CANARIES = 64


def _below(rate: float, *parts: object) -> bool:
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") < rate * 2**64


class SampledJudge:
    """The server's reply: the fake judge's verdict (the other one on the ``changed`` share of
    prompts, by hash), answered the other way with probability ``flip`` per request: the n-th
    ask of a prompt flips by the hash of (prompt, n), whatever order the requests arrive in."""

    def __init__(self, flip: float = 0.1) -> None:
        self.flip, self.changed = flip, 0.0
        self.asks: Counter[str] = Counter()
        self.at_pin: Counter[int] = Counter()
        self._lock = threading.Lock()

    def __call__(self, prompt: str) -> str:
        with self._lock:
            n = self.asks[prompt]
            self.asks[prompt] += 1
        verdict = choose(prompt)
        if verdict not in ("A", "B"):
            return verdict
        flips = _below(self.changed, "changed", prompt) + _below(self.flip, "sample", prompt, n)
        return verdict if flips % 2 == 0 else {"A": "B", "B": "A"}[verdict]


@pytest.fixture(scope="module")
def sampled(tmp_path_factory):
    """A run of one remote sampled judge, pinned with --manifest (2 re-asks a presentation):
    (lock, manifest, the judge, its server)."""
    folder = tmp_path_factory.mktemp("noise")
    judge = SampledJudge()
    with pytest.MonkeyPatch.context() as monkeypatch, FakeJudgeServer(reply=judge) as server:
        monkeypatch.setenv(KEY_ENV, "k")
        spec = {"name": "sampled", "backend": "openai", "model": "judge-model", "endpoint": server.url,
                "api_key_env": KEY_ENV, "concurrency": 8, "retries": 0, "timeout_s": 5}
        langs = ["en", "es", "zh", "hi", "ar", "sw"]
        manifest = write_manifest(folder, [spec], scoring={"bootstrap": 0},
                                  corpus={"references_per_language": 11, "languages": langs},
                                  perturbations=[{"name": "truncate", "severities": [0.5]}])
        assert main(["audit", str(manifest)]) == 0
        lock = folder / "judge.lock.json"
        assert main(["pin", str(folder / "run"), "--out", str(lock), "--manifest", str(manifest),
                     "--canary", str(CANARIES)]) == 0
        judge.at_pin = Counter(judge.asks.values())  # how many prompts were asked how often, so far
        yield lock, manifest, judge, server


@pytest.fixture(scope="module")
def from_samples(tmp_path_factory):
    """A run of the sampled judge asked ``samples: 3``, pinned without --manifest: its later
    samples are the re-asks. (lock, manifest, the judge, the asks pin made)."""
    folder = tmp_path_factory.mktemp("noise-samples")
    judge = SampledJudge()
    with pytest.MonkeyPatch.context() as monkeypatch, FakeJudgeServer(reply=judge) as server:
        monkeypatch.setenv(KEY_ENV, "k")
        spec = {"name": "sampled", "backend": "openai", "model": "judge-model", "endpoint": server.url,
                "api_key_env": KEY_ENV, "concurrency": 8, "retries": 0, "timeout_s": 5, "samples": 3}
        langs = ["en", "es", "zh", "hi", "ar", "sw"]
        manifest = write_manifest(folder, [spec], scoring={"bootstrap": 0}, seed=2,
                                  corpus={"references_per_language": 11, "languages": langs},
                                  perturbations=[{"name": "truncate", "severities": [0.5]}])
        assert main(["audit", str(manifest)]) == 0
        before = sum(judge.asks.values())
        lock = folder / "judge.lock.json"
        assert main(["pin", str(folder / "run"), "--out", str(lock), "--canary", str(CANARIES)]) == 0
        yield lock, manifest, judge, sum(judge.asks.values()) - before


def test_pin_from_a_sampled_run_takes_the_baseline_from_its_samples_and_check_holds_to_it(from_samples, capsys,
                                                                                          monkeypatch):
    """Sample 0 pinned, samples 1 and 2 the re-asks (two draws against the pinned one, as pin's
    own re-asks are): the same self-flip rate, 0.18, with no call; 10 unchanged checks, at most
    1 alarm; 30 % of the base verdicts changed, at least 9 of 10 exit 1."""
    lock, manifest, judge, pin_asks = from_samples
    (locked,) = lockfile.read(lock).judges
    f = locked.self_flip
    assert pin_asks == 0 and f is not None and f.source == "samples" and f.repeats == 2
    assert f.asked == 2 * 2 * CANARIES and all(len(v) == 2 for c in locked.canary for v in c.repeats.values())
    assert f.lo <= 0.18 <= f.hi
    monkeypatch.setenv(KEY_ENV, "k")
    unchanged = _checks(lock, manifest, 10, capsys)
    assert unchanged.count(1) <= 1 and all(r.flip_test == "fisher" for r in lockfile.read(lock).checks), unchanged
    judge.changed = 0.3
    changed = _checks(lock, manifest, 10, capsys)
    assert changed.count(1) >= 9, changed
    print(f"self-flip from samples: {f.flips} of {f.asked} ({f.rate} [{f.lo}, {f.hi}]); unchanged checks "
          f"{unchanged.count(1)} of 10 alarmed, changed {changed.count(1)} of 10", file=sys.stderr)


def _checks(lock, manifest, times: int, capsys) -> list[int]:
    codes = []
    for _ in range(times):
        codes.append(main(["check", str(lock), "--manifest", str(manifest)]))
        capsys.readouterr()
    return codes


def test_pin_measures_the_judges_own_flip_rate(sampled, capsys):
    lock, _, judge, _ = sampled
    (locked,) = lockfile.read(lock).judges
    f = locked.self_flip
    assert len(locked.canary) == CANARIES and f is not None and f.repeats == 2
    assert f.asked == 2 * 2 * CANARIES  # two re-asks of each presentation, all answered
    assert all(len(v) == 2 for c in locked.canary for v in c.repeats.values())
    # every pinned presentation was asked exactly three times: the audit, then two re-asks
    assert judge.at_pin[3] == 2 * CANARIES
    # a re-ask and the pinned answer are two draws: they disagree at 2 · 0.1 · 0.9 = 0.18
    assert f.lo <= 0.18 <= f.hi and 0.10 <= f.rate <= 0.26


def test_an_unchanged_sampled_judge_passes_and_a_silently_changed_one_is_caught(sampled, capsys, monkeypatch):
    lock, manifest, judge, _ = sampled
    monkeypatch.setenv(KEY_ENV, "k")
    unchanged = _checks(lock, manifest, 10, capsys)
    assert unchanged.count(1) <= 1, unchanged
    results = lockfile.read(lock).checks[-10:]
    assert all(r.flip_test == "fisher" and r.identity_changed == [] and r.failed == 0 for r in results)
    rate = sum(r.verdict_flips for r in results) / sum(r.answered for r in results)
    assert 0.13 <= rate <= 0.23  # about 0.18: the pinned self-flip rate, not 0
    judge.changed = 0.3  # same model, same fingerprint: 30 % of its base verdicts now the other way
    try:
        changed = _checks(lock, manifest, 10, capsys)
    finally:
        judge.changed = 0.0
    assert changed.count(1) >= 9, changed
    drifted = lockfile.read(lock).checks[-10:]
    assert all(r.drift and not r.identity_changed for r in drifted if not r.ok)
    assert sum(r.verdict_flips for r in drifted) / sum(r.answered for r in drifted) > 0.3  # about 0.372


def test_the_summary_names_the_test_and_its_baseline(sampled, capsys, monkeypatch):
    lock, manifest, _, _ = sampled
    main(["check", str(lock), "--manifest", str(manifest)])
    out = capsys.readouterr().out
    rate = lockfile.read(lock).judges[0].self_flip.rate
    last = lockfile.read(lock).checks[-1]
    assert (f"sampled: {last.verdict_flips} of {last.answered} answers flipped, {rate:.3f} expected (the self-flip "
            "rate pin measured); one-sided Fisher exact test against pin's re-asks") in out


def test_a_lock_without_a_baseline_falls_back_to_the_tolerance_and_says_so(sampled, tmp_path, capsys):
    lock, manifest, _, _ = sampled
    raw = json.loads(lock.read_bytes())
    for j in raw["judges"]:  # a lock of an earlier version: no self-flip rate, no re-asks
        j.pop("self_flip")
        for c in j["canary"]:
            c.pop("repeats", None)
            c.pop("repeat_scores", None)
    old = tmp_path / "old.lock.json"
    old.write_text(json.dumps(raw))
    code = main(["check", str(old), "--manifest", str(manifest)])
    out = capsys.readouterr().out
    assert "the lock records no self-flip rate" in out and "against the tolerance 0.05" in out
    result = lockfile.read(old).checks[-1]
    assert result.flip_test == "tolerance" and result.expected_flip_rate == 0.05
    # 0.18 against a fixed 5 %: the unchanged sampled judge alarms, which is why pin measures it
    assert code == 1 and result.drift


def test_pin_without_a_manifest_records_no_baseline_and_says_so(sampled, tmp_path, capsys):
    lock, manifest, _, _ = sampled
    run = manifest.parent / "run"
    out_lock = tmp_path / "plain.lock.json"
    assert main(["pin", str(run), "--out", str(out_lock), "--canary", "4"]) == 0
    assert "no self-flip rate recorded" in capsys.readouterr().out
    assert lockfile.read(out_lock).judges[0].self_flip is None


@pytest.mark.parametrize("repeats", ["1", "11", "0"])
def test_repeats_out_of_bounds_is_a_one_line_error(sampled, tmp_path, capsys, repeats):
    lock, manifest, _, _ = sampled
    out_lock = tmp_path / "x.lock.json"
    assert main(["pin", str(manifest.parent / "run"), "--out", str(out_lock), "--manifest", str(manifest),
                 "--repeats", repeats]) == 2
    assert "--repeats must be in [2, 10]" in capsys.readouterr().err
    assert not out_lock.exists()


def test_a_lock_whose_self_flip_counts_are_impossible_is_a_bad_lock_file(sampled, tmp_path, capsys):
    lock, manifest, judge, _ = sampled
    raw = json.loads(lock.read_bytes())
    raw["judges"][0]["self_flip"]["flips"] = raw["judges"][0]["self_flip"]["asked"] + 1
    bad = tmp_path / "bad.lock.json"
    bad.write_text(json.dumps(raw))
    before = sum(judge.asks.values())
    assert main(["check", str(bad), "--manifest", str(manifest)]) == 2
    assert "more flips than re-asks" in capsys.readouterr().err
    assert sum(judge.asks.values()) == before  # no call made


def test_pin_refuses_a_manifest_judge_that_is_not_the_one_the_run_recorded(sampled, tmp_path, capsys):
    _, manifest, judge, _ = sampled
    other = tmp_path / "other.yaml"
    other.write_text(manifest.read_text().replace("judge-model", "another-model"))
    out_lock = tmp_path / "x.lock.json"
    before = sum(judge.asks.values())
    assert main(["pin", str(manifest.parent / "run"), "--out", str(out_lock), "--manifest", str(other)]) == 2
    assert "is not the one the run recorded" in capsys.readouterr().err
    assert sum(judge.asks.values()) == before and not out_lock.exists()  # no call, nothing written

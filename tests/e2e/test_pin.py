"""`babelrun pin` then `babelrun check` against a loopback judge server: an
unchanged server passes; one that flips 30 % of its answers, or reports another served model,
fails naming the judge; the lock file keeps every check."""

from __future__ import annotations

import shutil

import pytest

from babelrun.app import lockfile
from babelrun.app.cli import main
from babelrun.testing import FakeJudgeServer
from helpers import write_manifest

KEY_ENV = "BABELRUN_PIN_TEST_KEY"


@pytest.fixture(scope="module")
def _pinned_once(tmp_path_factory):
    """The audit and pin behind ``pinned``, made once for the module: (folder, port)."""
    folder = tmp_path_factory.mktemp("pinned")
    with pytest.MonkeyPatch.context() as monkeypatch, FakeJudgeServer() as server:
        monkeypatch.setenv(KEY_ENV, "k")
        judge = {"name": "remote", "backend": "openai", "model": "judge-model", "endpoint": server.url,
                 "api_key_env": KEY_ENV, "concurrency": 4, "retries": 2, "timeout_s": 5}
        manifest = write_manifest(folder, [judge], corpus={"references_per_language": 4,
                                                           "languages": ["en", "es", "zh", "hi", "ar", "sw"]},
                                  perturbations=[{"name": "truncate", "severities": [0.5]}])
        assert main(["audit", str(manifest)]) == 0
        port = server.port
        # 24 canary items, 48 calls
        assert main(["pin", str(folder / "run"), "--out", str(folder / "judge.lock.json")]) == 0
    return folder, port


@pytest.fixture
def pinned(_pinned_once, tmp_path, monkeypatch):
    """A run of one remote judge on the bundled corpus, pinned (a copy of the module's, for this
    test's checks to append to); the server's port, to reuse."""
    monkeypatch.setenv(KEY_ENV, "k")
    once, port = _pinned_once
    folder = tmp_path / "pinned"
    shutil.copytree(once, folder)
    return folder / "judge.lock.json", port, folder / "manifest.yaml"


def _check(lock, manifest, capsys, **server) -> tuple[int, str]:
    with FakeJudgeServer(**server):
        code = main(["check", str(lock), "--manifest", str(manifest)])
    return code, capsys.readouterr().out


def test_the_lock_file_pins_identity_and_a_canary_set(pinned):
    lock, _, _ = pinned
    data = lockfile.read(lock)
    (judge,) = data.judges
    assert judge.served_model == "fake-judge-1" and judge.fingerprint == "fp_fake"
    assert judge.template == "pairwise@v1" and len(judge.template_sha) == 24
    assert len(judge.canary) == 24 and all(set(c.verdicts) == {"ref_first", "pert_first"} for c in judge.canary)
    assert data.checks == []


def test_check_passes_an_unchanged_judge_and_fails_a_drifted_one(pinned, capsys):
    lock, port, manifest = pinned
    code, out = _check(lock, manifest, capsys, port=port)
    assert code == 0, out
    assert "no drift" in out
    # 30 % of prompts answered the other way: most canary presentations that were right are now
    # wrong; the judge is named with its p-value
    code, out = _check(lock, manifest, capsys, port=port, flip_rate=0.3)
    assert code == 1
    (result,) = lockfile.read(lock).checks[-1:]
    assert result.judge == "remote" and result.drift and result.flip_p < 0.05
    # every flip of a two-answer judge changes correctness one way or the other
    assert result.verdict_flips == result.right_then_only + result.right_now_only
    assert 0.15 <= result.verdict_flips / result.answered <= 0.45  # 30 % of prompts, by hash
    assert "remote" in out and f"flips p={result.flip_p:.3g}" in out
    # another served model: an identity change, whatever the verdicts
    code, out = _check(lock, manifest, capsys, port=port, model="fake-judge-2")
    assert code == 1 and "served_model: fake-judge-1 -> fake-judge-2" in out
    checks = lockfile.read(lock).checks
    assert [c.ok for c in checks] == [True, False, False]  # the lock file is the changelog


def test_check_of_an_unreachable_judge_fails_and_says_so(pinned, capsys):
    lock, _, manifest = pinned  # the fixture's server is gone: its port refuses every call
    assert main(["check", str(lock), "--manifest", str(manifest)]) == 1
    assert "canary call(s) failed" in capsys.readouterr().out


def test_a_missing_lock_file_is_a_one_line_error(tmp_path, capsys):
    assert main(["check", str(tmp_path / "nope.json")]) == 2
    assert "no such lock file" in capsys.readouterr().err

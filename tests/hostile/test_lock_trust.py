"""C1, C2, M6 and the lock's minor findings: a lock file is data (it is committed, shared and
checked in CI), so ``babelrun check`` builds every judge from the user's manifest and never
from the lock. A tampered lock (endpoint, header variables, backend, callable; its judge_id
recomputed or not) sends 0 requests anywhere and imports nothing; its numbers are held to the
CLI's limits; a 401 is one line; concurrent checks keep both results; ``pin --out`` over a lock
keeps its checks (docs/trust.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading

import msgspec
import pytest

from babelrun import judges
from babelrun.app import lockfile
from babelrun.app.cli import main
from babelrun.spec import JudgeSpec
from babelrun.spec.flat import split_judge
from babelrun.spec.options import typed_options
from babelrun.testing import FakeJudgeServer
from helpers import ROOT, SHARED_DATA, quiet_audit, simulated, write_manifest

KEY_ENV = "BABELRUN_LOCK_TRUST_KEY"
KEY = "sk-LOCKCANARY-3b9e1f0a7c2d4e6f8a0b"
OTHER_ENV = "BABELRUN_LOCK_TRUST_OTHER"
OTHER = "other-secret-5d1c9e"
CI_HELPERS = f"""\
import pathlib, os
pathlib.Path("IMPORTED").write_text(os.environ.get("{KEY_ENV}", "?"))
def grade(request):
    return "A"
"""


def _secrets(monkeypatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setenv(OTHER_ENV, OTHER)


@pytest.fixture(scope="module")
def _pinned_once(tmp_path_factory):
    """The audit and pin behind ``pinned``, made once for the module: (folder, port)."""
    folder = tmp_path_factory.mktemp("pinned")
    with pytest.MonkeyPatch.context() as monkeypatch, FakeJudgeServer() as server:
        _secrets(monkeypatch)
        judge = {"name": "remote", "backend": "openai", "model": "judge-model", "endpoint": server.url,
                 "api_key_env": KEY_ENV, "concurrency": 2, "retries": 0, "timeout_s": 5}
        manifest = write_manifest(folder, [judge], corpus={"references_per_language": 3, "languages": ["en", "es"]},
                                  perturbations=[{"name": "truncate", "severities": [0.5]}])
        assert main(["audit", str(manifest)]) == 0
        port = server.port
        assert main(["pin", str(folder / "run"), "--out", str(folder / "judge.lock.json"), "--canary", "4"]) == 0
    (folder / "ci_helpers.py").write_text(CI_HELPERS)  # beside the lock, on `python -m`'s path
    return folder, port


@pytest.fixture
def pinned(_pinned_once, tmp_path, monkeypatch):
    """A remote judge's run, pinned with 4 canaries (8 calls): a copy of the module's, for this
    test to tamper with; (lock, manifest, port), the key variables set."""
    _secrets(monkeypatch)
    once, port = _pinned_once
    folder = tmp_path / "pinned"
    shutil.copytree(once, folder)
    return folder / "judge.lock.json", folder / "manifest.yaml", port


def _as_read(flat: dict) -> JudgeSpec:
    """The judge spec a lock file's flat entry reads as (its options as a lock of any version
    has them: the old backend's options at their defaults left beside the new backend's)."""
    common, own = split_judge(flat)
    spec = msgspec.convert(common, JudgeSpec)
    return msgspec.structs.replace(spec, options=typed_options(spec.backend, own, judges.options_type, legacy=True))


def _tamper(lock, recompute: bool, **spec_fields) -> None:
    raw = json.loads(lock.read_bytes())
    spec = raw["judges"][0]["spec"]
    spec.update(spec_fields)
    if recompute:  # the judge_id the edited spec hashes to: the lock looks self-consistent
        raw["judges"][0]["judge_id"] = judges.judge_id(_as_read(spec))
    lock.write_text(json.dumps(raw))


def _check_cli(lock, manifest, *extra, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "babelrun", "check", str(lock), "--manifest", str(manifest), *extra],
                          cwd=cwd or lock.parent, env=env, capture_output=True, text=True, timeout=120)


TAMPERED = {
    "endpoint": lambda elsewhere: {"endpoint": elsewhere.url},
    "headers_env": lambda elsewhere: {"headers_env": {"X-Exfil": OTHER_ENV}},
    "endpoint+headers_env": lambda elsewhere: {"endpoint": elsewhere.url, "headers_env": {"X-Exfil": OTHER_ENV}},
    "python callable": lambda elsewhere: {"backend": "python", "callable": "ci_helpers:grade", "endpoint": None},
    "builtins:print": lambda elsewhere: {"backend": "python", "callable": "builtins:print", "endpoint": None},
}


@pytest.mark.parametrize("recompute", [True, False], ids=["judge_id recomputed", "judge_id kept"])
@pytest.mark.parametrize("how", list(TAMPERED))
def test_a_tampered_lock_sends_nothing_and_runs_nothing(how, recompute, pinned):
    """C1 + C2: 0 requests to the lock's endpoint (or the manifest's), the key and the other
    secret nowhere, ci_helpers never imported; exit 1, the change named, no traceback."""
    lock, manifest, port = pinned
    with FakeJudgeServer(port=port) as mine, FakeJudgeServer() as elsewhere:
        _tamper(lock, recompute, **TAMPERED[how](elsewhere))
        proc = _check_cli(lock, manifest)
        assert elsewhere.requests == 0 and not elsewhere.authorizations
        assert mine.requests == 0  # refused before any call
    printed = proc.stdout + proc.stderr
    assert proc.returncode == 1, printed
    assert "Traceback" not in printed and "IDENTITY CHANGED" in printed and "no call made" in printed
    assert not (lock.parent / "IMPORTED").exists()
    assert KEY not in printed and OTHER not in printed
    assert KEY.encode() not in lock.read_bytes()


def test_an_untampered_lock_asks_only_the_manifests_endpoint(pinned):
    lock, manifest, port = pinned
    with FakeJudgeServer(port=port) as mine, FakeJudgeServer() as elsewhere:
        proc = _check_cli(lock, manifest)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert mine.requests == 8 and elsewhere.requests == 0
    assert "no drift" in proc.stdout


def test_check_without_a_manifest_is_refused_in_one_line(pinned, capsys):
    lock, _, _ = pinned
    assert main(["check", str(lock)]) == 2
    err = capsys.readouterr().err.strip()
    assert "--manifest" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(("field", "value", "why"), [
    ("tolerance", 1.0, "tolerance"), ("alpha", 0.0, "alpha"), ("alpha", 1.5, "alpha")])
def test_a_locks_numbers_are_held_to_the_clis_limits(field, value, why, pinned, capsys):
    """M6: tolerance 1.0 / alpha 0.0 made every flip 'ok'; refused as a bad lock, exit 2."""
    lock, manifest, port = pinned
    raw = json.loads(lock.read_bytes())
    raw[field] = value
    lock.write_text(json.dumps(raw))
    with FakeJudgeServer(port=port) as mine:
        assert main(["check", str(lock), "--manifest", str(manifest)]) == 2
    assert mine.requests == 0
    err = capsys.readouterr().err
    assert why in err and "not a babelrun lock file" in err and len(err.strip().splitlines()) == 1


def test_a_lock_with_thousands_of_canaries_is_refused(pinned, capsys):
    """M6: 6,000 canaries sent 12,000 requests; the lock's canary count is bounded like --canary."""
    lock, manifest, port = pinned
    raw = json.loads(lock.read_bytes())
    raw["judges"][0]["canary"] = raw["judges"][0]["canary"] * 1500
    lock.write_text(json.dumps(raw))
    with FakeJudgeServer(port=port) as mine:
        assert main(["check", str(lock), "--manifest", str(manifest)]) == 2
    assert mine.requests == 0
    assert "not a babelrun lock file" in capsys.readouterr().err
    assert main(["pin", str(lock.parent / "run"), "--out", str(lock.parent / "x.json"), "--canary", "6000"]) == 2


def test_an_unknown_backend_in_a_lock_is_one_line_exit_2(pinned, capsys):
    """Was a KeyError traceback (the lock's spec was built)."""
    lock, manifest, port = pinned
    _tamper(lock, False, backend="no-such-backend")
    with FakeJudgeServer(port=port) as mine:
        assert main(["check", str(lock), "--manifest", str(manifest)]) == 2
    assert mine.requests == 0
    err = capsys.readouterr().err.strip()
    assert "unknown backend 'no-such-backend'" in err and len(err.splitlines()) == 1


def test_a_bad_template_in_a_lock_is_never_parsed(pinned, capsys):
    """Was a TemplateError traceback: the lock's recorded template is never parsed nor read
    (the manifest's is, and its text is compared by hash): the check runs as usual."""
    lock, manifest, port = pinned
    _tamper(lock, False, prompt="{answer_a:{answer_b}")
    with FakeJudgeServer(port=port) as mine:
        assert main(["check", str(lock), "--manifest", str(manifest)]) == 0
    assert mine.requests == 8
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "no drift" in out


def test_a_changed_template_text_is_an_identity_change_before_any_call(pinned, capsys):
    lock, manifest, port = pinned
    raw = json.loads(lock.read_bytes())
    raw["judges"][0]["template_sha"] = "0" * 24
    lock.write_text(json.dumps(raw))
    with FakeJudgeServer(port=port) as mine:
        assert main(["check", str(lock), "--manifest", str(manifest)]) == 1
    assert mine.requests == 0
    assert "its text changed" in capsys.readouterr().out


def test_check_against_a_401_is_one_line(pinned, capsys, monkeypatch):
    """Was a 63-line ExceptionGroup."""
    lock, manifest, port = pinned
    with FakeJudgeServer(port=port, api_key="another-key") as mine:
        code = main(["check", str(lock), "--manifest", str(manifest)])
    out, err = capsys.readouterr()
    assert code == 1 and 0 < mine.requests <= 2  # stopped at the first 401 (2 workers)
    assert "ExceptionGroup" not in out + err and "Traceback" not in out + err
    assert "stopped:" in out and "401" in out
    (result,) = lockfile.read(lock).checks
    assert result.stopped and not result.ok


def test_two_checks_at_once_keep_both_appended_checks(pinned):
    """Both processes are mid-call together (the server holds its replies until 2 requests
    are in flight at once, one from each: concurrency 1), so both read the lock before either
    appends: before, the second write dropped the first's check."""
    lock, manifest, port = pinned
    text = manifest.read_text().replace("concurrency: 2", "concurrency: 1")
    manifest.write_text(text)
    with FakeJudgeServer(port=port, gather=2, gather_timeout_s=60) as server:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        cmd = [sys.executable, "-m", "babelrun", "check", str(lock), "--manifest", str(manifest)]
        procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
        codes = [p.wait(timeout=120) for p in procs]
        assert server.gathered
    assert codes == [0, 0], [p.stderr.read() for p in procs]
    assert len(lockfile.read(lock).checks) == 2


def test_appends_from_threads_are_never_lost(pinned):
    lock, _, _ = pinned
    result = lockfile.CheckResult("remote", "x", "now", 0, 0, 0, 0, 0, 0, 1.0, 1.0, None, None, [], False, True)
    barrier = threading.Barrier(4)

    def append() -> None:
        barrier.wait()
        for _ in range(10):
            lockfile.append_checks(lock, [result])

    threads = [threading.Thread(target=append) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(lockfile.read(lock).checks) == 40


def test_pin_over_an_existing_lock_keeps_its_checks(pinned, capsys):
    lock, manifest, port = pinned
    with FakeJudgeServer(port=port):
        assert main(["check", str(lock), "--manifest", str(manifest)]) == 0
    first = lockfile.read(lock)
    assert len(first.checks) == 1
    assert main(["pin", str(lock.parent / "run"), "--out", str(lock), "--canary", "4"]) == 0
    again = lockfile.read(lock)
    assert again.checks == first.checks and again.repinned == [first.pinned_at]
    assert "1 earlier check(s) kept" in capsys.readouterr().out


def test_pin_never_overwrites_a_file_that_is_not_a_lock(pinned, capsys):
    lock, _, _ = pinned
    notes = lock.parent / "notes.json"
    notes.write_text('{"mine": true}')
    assert main(["pin", str(lock.parent / "run"), "--out", str(notes)]) == 2
    assert notes.read_text() == '{"mine": true}'
    assert "not a babelrun lock file" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["nan", "inf", "-2"])
def test_agree_min_kappa_nan_is_refused_not_a_gate_turned_off(value, tmp_path, capsys):
    """`--min-kappa nan` compared false with every kappa: the gate passed silently (exit 0)."""
    llmbar = SHARED_DATA / "llmbar" / "LLMBar_Natural"
    if not llmbar.exists():
        pytest.skip(f"shared data absent: {llmbar}")
    path = write_manifest(tmp_path, [simulated("lb", default_accuracy=0.55)], scoring={"bootstrap": 0}, corpus={
        "sources": [{"kind": "labelled_pairs", "path": str(llmbar), "pairs_per_set": 12}]})
    assert quiet_audit(path).exit_code == 0
    assert main(["agree", str(tmp_path / "run"), str(llmbar), "--min-kappa", value]) == 2
    assert "--min-kappa" in capsys.readouterr().err

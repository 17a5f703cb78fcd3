"""Untrusted inputs: user regexes never hang a run (M1/M2), numbers from outside are
bounded where they enter (M3, M4, M5, a Python judge's reply), a slow Python judge never holds
a drain (M9), templates and template files are bounded (M7, the 2 GB file, /proc/self/environ),
and YAML/JSON inputs are bounded before they are expanded (M8, 100,000 nested ``[``).

Each test failed before its fix (a hang, a traceback, a bricked run) and passes now. Hangs are
guarded by subprocess timeouts; the one timing assertion is the alias bomb's (1 s, generous)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from babelrun.app.cli import main
from babelrun.score.diagnose import EXIT_MISCONFIGURED
from helpers import ROOT, LoopbackServer, quiet_audit, write_manifest

KEY_ENV = "BABELRUN_INPUTS_KEY"
CORPUS = {"sources": [{"kind": "bundled"}], "languages": ["en"], "references_per_language": 2}
ONE = [{"name": "truncate", "severities": [0.5]}]


class Provider(LoopbackServer):
    """An OpenAI-compatible endpoint answering every call with the same body: ``content``,
    ``usage`` as given, and ``top`` (token, logprob) pairs as the first token's log-probs."""

    def __init__(self, content: str = "A", usage: dict | None = None, top: list | None = None):
        self.content, self.usage, self.top = content, usage, top
        self.requests = 0

    def add_routes(self, app) -> None:
        from aiohttp import web

        async def chat(request):
            self.requests += 1
            await request.read()
            choice: dict = {"index": 0, "message": {"role": "assistant", "content": self.content},
                            "finish_reason": "stop"}
            if self.top is not None:
                choice["logprobs"] = {"content": [{"token": self.content, "logprob": -0.1,
                                                   "top_logprobs": [{"token": t, "logprob": lp}
                                                                    for t, lp in self.top]}]}
            body = {"id": "x", "object": "chat.completion", "model": "m", "choices": [choice]}
            if self.usage is not None:
                body["usage"] = self.usage
            return web.Response(body=json.dumps(body).encode(), content_type="application/json")

        app.router.add_post("/v1/chat/completions", chat)


def _openai(server: Provider, **fields) -> dict:
    return {"name": "j", "backend": "openai", "model": "m", "endpoint": f"{server.url}/v1", "api_key_env": KEY_ENV,
            "retries": 0, **fields}


def _env(**extra: str) -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *extra.pop("path", "").split(os.pathsep)]),
            KEY_ENV: "k", **extra}


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for seg in sorted((run_dir / "log").glob("*.jsonl"))
            for line in seg.read_bytes().splitlines() if line.strip()]


def _audit(manifest: Path, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "babelrun", "audit", str(manifest)], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env=env or _env())


# ---- M1/M2: user regexes ------------------------------------------------------------------


@pytest.mark.parametrize(("pattern", "timed_out"), [("(a+)+$", False), ("(a|aa)+$", True)])
def test_a_redos_verdict_pattern_finishes_with_the_replies_invalid(pattern, timed_out, tmp_path):
    """M1: a verdict pattern that backtracks exponentially on the reply (40 ``a`` and a ``!``)
    no longer freezes the loop: the audit ends, every reply is recorded read ``invalid``; one
    the engine gave up on carries ``error_kind: pattern_timeout``. (Before: 100 % CPU, no
    record, signals ignored; the subprocess timeout guards the hang.)"""
    with Provider(content="a" * 40 + "!") as server:
        manifest = write_manifest(tmp_path, [_openai(server, verdict={"pattern": pattern}, concurrency=2)],
                                  corpus=CORPUS, perturbations=ONE)
        done = _audit(manifest)
    # The audit ends; every reply invalid makes the judge misconfigured (exit 3, a
    # diagnosis line naming the pattern), not a hang and not a crash.
    assert done.returncode == EXIT_MISCONFIGURED, done.stderr
    assert "did not match the verdict pattern" in done.stderr and pattern in done.stderr
    records = _records(tmp_path / "run")
    assert records and all(r["status"] == "ok" and r["slot"] == "invalid" for r in records)
    kinds = {r.get("error_kind") for r in records}
    assert kinds == ({"pattern_timeout"} if timed_out else {None})


def test_a_redos_rule_finishes_with_the_pairs_invalid(tmp_path):
    """M2: ``backend: rule`` with a regex that backtracks exponentially over the corpus's text:
    each pair is recorded invalid (``pattern_timeout``), the audit ends."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"r{i}", "language": "en", "prompt": "Say a.",
                                          "reference": "a" * (40 + i) + "! " + "Then the sentence ends here. " * 3})
                              + "\n" for i in range(3)))
    judge = {"name": "rule", "backend": "rule", "rule": {"kind": "regex", "pattern": "(a|aa)+$"}}
    manifest = write_manifest(tmp_path, [judge], corpus={"sources": [{"kind": "jsonl", "path": str(corpus)}],
                                                          "languages": ["en"]}, perturbations=ONE)
    done = _audit(manifest)
    assert done.returncode == EXIT_MISCONFIGURED, done.stderr  # ends; every pair unreadable: misconfigured
    records = _records(tmp_path / "run")
    assert records and all(r["status"] == "ok" and r["slot"] == "invalid" and r["error_kind"] == "pattern_timeout"
                           for r in records)


def test_nested_quantifiers_are_warned_at_validate(tmp_path, capsys):
    manifest = write_manifest(tmp_path, [{"name": "p", "backend": "python", "callable": "m:f",
                                          "verdict": {"pattern": "(a+)+$"}}])
    assert main(["validate", str(manifest)]) == 0
    err = capsys.readouterr().err
    assert "warning" in err and "judges[0].verdict.pattern" in err and "nests quantifiers" in err


# ---- M3, M4, M5: numbers from a provider and a log ------------------------------------------


def test_an_out_of_range_log_number_is_a_bad_line_not_a_bricked_run(finished, capsys):
    """M3: a hand-edited ``ref_len: 99999999999999999999`` (past int64) is one skipped, named
    bad line under the one validity rule; score, report and export still work."""
    _, _, run = finished
    seg = sorted((run / "log").glob("*.jsonl"))[0]
    lines = seg.read_bytes().splitlines(keepends=True)
    record = json.loads(lines[0])
    record["ref_len"] = 99999999999999999999
    seg.write_bytes(json.dumps(record).encode() + b"\n" + b"".join(lines[1:]))
    for command in (["score", str(run)], ["report", str(run)], ["export", str(run), "--format", "csv"]):
        assert main(command) == 0, command
    err = capsys.readouterr().err
    assert "ref_len out of range" in err or "invalid log line" in err


@pytest.mark.parametrize("tokens", [10**30, 2**63, -5])
def test_a_providers_token_count_is_bounded_at_the_boundary(tokens, tmp_path, monkeypatch):
    """M3 at the wire: usage of 10^30 (or 2^63, or negative) is clamped (or unknown), so the
    log reads back: the run scores."""
    monkeypatch.setenv(KEY_ENV, "k")
    with Provider(usage={"prompt_tokens": tokens, "completion_tokens": 1}) as server:
        manifest = write_manifest(tmp_path, [_openai(server)], corpus=CORPUS, perturbations=ONE)
        assert quiet_audit(manifest).exit_code == 0
    records = _records(tmp_path / "run")
    from babelrun.core.bounds import MAX_COUNT

    assert records and all(r["status"] == "ok" for r in records)
    assert {r.get("tokens_in") for r in records} == ({None} if tokens < 0 else {MAX_COUNT})
    assert main(["score", str(tmp_path / "run")]) == 0


def test_a_huge_usage_under_a_tpm_limit_still_writes_records_and_drains(tmp_path):
    """M4: ``usage.prompt_tokens: 10^12`` with ``tpm: 100000``: the call's record is written
    (its bill is owed by the next call, a wait the drain ends), and the first SIGTERM ends the
    run, exit 130. (Before: 0 records, SIGTERM ignored.)"""
    with Provider(usage={"prompt_tokens": 10**12, "completion_tokens": 1}) as server:
        manifest = write_manifest(tmp_path, [_openai(server, concurrency=1, rate_limit={"tpm": 100000})],
                                  corpus=CORPUS, perturbations=ONE)
        proc = subprocess.Popen([sys.executable, "-m", "babelrun", "audit", str(manifest)], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
        try:
            deadline = time.monotonic() + 60
            while not _records_so_far(tmp_path / "run") and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _records_so_far(tmp_path / "run"), "no record was written"
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)
        finally:
            proc.kill()
    assert proc.returncode == 130
    assert any(r["status"] == "ok" for r in _records(tmp_path / "run"))


def _records_so_far(run_dir: Path) -> int:
    folder = run_dir / "log"
    return sum(p.read_bytes().count(b"\n") for p in folder.glob("*.jsonl")) if folder.exists() else 0


def test_a_logprob_of_1000_is_clamped(tmp_path, monkeypatch):
    """M5: a ``top_logprobs`` entry of ``logprob: 1000`` (OverflowError before: no cards)."""
    from babelrun.judges.prompt import slot_probabilities

    assert slot_probabilities([("A", 1000.0), ("B", -1.0)]) == pytest.approx((1 / (1 + math.exp(-1)),
                                                                              math.exp(-1) / (1 + math.exp(-1)), 0))
    assert slot_probabilities([("A", math.nan)]) is None
    monkeypatch.setenv(KEY_ENV, "k")
    with Provider(content="A", top=[["A", 1000.0], ["B", -2.0], ["tie", 1e308]]) as server:
        manifest = write_manifest(tmp_path, [_openai(server, soft=True)], corpus=CORPUS, perturbations=ONE)
        assert quiet_audit(manifest).exit_code == 0
    records = _records(tmp_path / "run")
    assert records and all(r["status"] == "ok" and math.isfinite(r["p_a"]) for r in records)


# ---- a Python judge's reply, its time, its exit -------------------------------------------

JUDGES = '''
import sys, time
from pathlib import Path

def lots(request):
    return {"verdict": "A", "tokens_in": "lots", "model": 12345}

def exits(request):
    raise SystemExit(0)

def stuck(request):
    Path(sys.argv[0]).parent  # (nothing)
    Path(__file__).with_name("called").write_text("yes")
    time.sleep(3600)
'''


@pytest.fixture
def code(tmp_path, monkeypatch):
    (tmp_path / "userjudges.py").write_text(JUDGES)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("userjudges", None)
    return tmp_path


def test_a_python_judges_bad_fields_are_named_one_line_each(code):
    """``tokens_in: "lots"`` aborted the audit with a traceback; ``model: 12345`` wrote invalid
    records: now each call is a ``bad_response`` error naming every bad field, one line each."""
    manifest = write_manifest(code, [{"name": "p", "backend": "python", "callable": "userjudges:lots"}],
                              corpus=CORPUS, perturbations=ONE)
    result = quiet_audit(manifest)
    assert result.exit_code != 0 or result  # it ends, however it is scored
    records = _records(code / "run")
    assert records and all(r["error_kind"] == "bad_response" for r in records)
    lines = records[0]["error"].split("\n")
    assert any("tokens_in must be a whole number" in x for x in lines) and any("model must be text" in x for x in lines)


def test_system_exit_from_a_python_judge_is_an_error_record_not_an_exit(code):
    manifest = write_manifest(code, [{"name": "p", "backend": "python", "callable": "userjudges:exits"}],
                              corpus=CORPUS, perturbations=ONE)
    quiet_audit(manifest)  # returns: no SystemExit escapes
    records = _records(code / "run")
    assert records and all(r["status"] == "error" and r["error_kind"] == "callable_error" for r in records)
    assert "SystemExit" in records[0]["error"]


def test_sigterm_ends_a_run_stuck_in_a_slow_python_judge(code):
    """M9: a sync callable that sleeps for an hour (``timeout_s: 600``): the first SIGTERM
    abandons the call in flight, and the run exits at once, 130 (resumable: no record for the
    stuck keys). (Before: it waited for ever; a second SIGTERM did nothing.)"""
    manifest = write_manifest(code, [{"name": "p", "backend": "python", "callable": "userjudges:stuck",
                                      "timeout_s": 600, "concurrency": 1}], corpus=CORPUS, perturbations=ONE)
    proc = subprocess.Popen([sys.executable, "-m", "babelrun", "audit", str(manifest)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(path=str(code)))
    try:
        deadline = time.monotonic() + 60
        while not (code / "called").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (code / "called").exists(), "the judge was never called"
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)  # a guard against the hang; it ends in well under 2 s
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert not [r for r in _records(code / "run") if r["status"] == "ok"]


def test_a_python_judges_timeout_is_enforced_for_a_sync_callable(code):
    """``timeout_s`` now bounds a sync callable: each call past it is a ``timeout``."""
    manifest = write_manifest(code, [{"name": "p", "backend": "python", "callable": "userjudges:stuck",
                                      "timeout_s": 0.2, "retries": 0, "concurrency": 2}],
                              corpus=CORPUS, perturbations=ONE)
    quiet_audit(manifest)
    records = _records(code / "run")
    assert records and all(r["error_kind"] == "timeout" for r in records)


# ---- M7: templates ----------------------------------------------------------------------


@pytest.mark.parametrize("user", ["{answer_a:>299999999}{answer_b}",
                                  "{answer_a}{answer_b:{answer_b.__class__.__name__}}",
                                  "{answer_a}{answer_b:{foo}}", "{answer_a:%}{answer_b}", "{answer_a!r}{answer_b}"])
def test_format_specs_are_refused_at_validate(user, tmp_path, capsys):
    """M7: a 300 MB width (two 300 MB requests before), nested specs (tracebacks before) and
    conversions: one line at validate, exit 2."""
    manifest = write_manifest(tmp_path, [{"name": "p", "backend": "python", "callable": "m:f",
                                          "prompt": {"user": user}}])
    assert main(["validate", str(manifest)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "judges[0].prompt" in err and "format spec" in err


def test_a_huge_template_file_is_refused_before_it_is_read(tmp_path, capsys):
    """A 2 GB template file (sparse: no disk used) is refused by its size, never read whole."""
    big = tmp_path / "big.txt"
    with big.open("wb") as f:
        f.truncate(2 << 30)
    manifest = write_manifest(tmp_path, [{"name": "p", "backend": "python", "callable": "m:f", "prompt": "big.txt"}])
    assert main(["validate", str(manifest)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "at most 1,048,576" in err


def test_proc_self_environ_is_not_a_template(tmp_path):
    """``prompt: /proc/self/environ`` was accepted (an environment that holds ``{answer_a}`` and
    ``{answer_b}`` is a valid template): the environment sent as the prompt and stored in
    run.yaml. A system file is refused, one line, exit 2."""
    if not os.path.exists("/proc/self/environ"):
        pytest.skip("no /proc here")
    manifest = write_manifest(tmp_path, [{"name": "p", "backend": "python", "callable": "m:f",
                                          "prompt": "/proc/self/environ"}])
    done = subprocess.run([sys.executable, "-m", "babelrun", "validate", str(manifest)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env=_env(BABELRUN_T="{answer_a} {answer_b}"))
    assert done.returncode == 2, done.stdout
    assert done.stderr.count("\n") == 1 and "system file" in done.stderr


def test_a_fifo_is_not_a_template(tmp_path, capsys):
    os.mkfifo(tmp_path / "pipe.txt")
    manifest = write_manifest(tmp_path, [{"name": "p", "backend": "python", "callable": "m:f",
                                          "prompt": {"file": "pipe.txt"}}])
    assert main(["validate", str(manifest)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "judges[0].prompt" in err


# ---- M8 and nesting: YAML and JSON inputs -------------------------------------------------


def _alias_bomb() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [{','.join([f'*{prev}'] * 10)}]")
    return "\n".join(lines) + "\nname: t\njudges: *i\n"


def test_a_yaml_alias_bomb_is_refused_within_a_second(tmp_path, capsys):
    """M8: 9 levels of 10 aliases (10^9 nodes expanded): ``validate`` never ended; now it is
    refused before anything is composed. (The 1 s bound is generous: it guards a hang.)"""
    manifest = tmp_path / "bomb.yaml"
    manifest.write_text(_alias_bomb())
    assert len(manifest.read_bytes()) < 600
    started = time.monotonic()
    assert main(["validate", str(manifest)]) == 2
    assert time.monotonic() - started < 1.0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "alias" in err


@pytest.mark.parametrize("depth", [200, 100_000])
def test_a_deeply_nested_manifest_is_one_line(depth, tmp_path, capsys):
    manifest = tmp_path / "deep.yaml"
    manifest.write_text("name: t\njudges: " + "[" * depth + "]" * depth + "\n")
    assert main(["validate", str(manifest)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_a_deeply_nested_corpus_line_is_one_line_at_validate(tmp_path, capsys):
    """100,000 nested ``[`` in a corpus line: RecursionError at validate (exit 1) before."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "r", "language": "en", "prompt": "q", "reference": ' + "[" * 100_000 + "]" * 100_000
                      + "}\n")
    manifest = write_manifest(tmp_path, [{"name": "s", "backend": "simulated"}],
                              corpus={"sources": [{"kind": "jsonl", "path": str(corpus)}], "languages": ["en"]},
                              perturbations=ONE)
    assert main(["validate", str(manifest)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nested too deeply" in err


def test_a_deeply_nested_prompt_collection_is_one_line(tmp_path, capsys):
    (tmp_path / "prompts.yaml").write_text("p: " + "[" * 500 + "]" * 500 + "\n")
    (tmp_path / "prompts.jsonl").write_text('{"name": "p", "user": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    for name in ("prompts.yaml", "prompts.jsonl"):
        manifest = write_manifest(tmp_path, [{"name": "p", "backend": "python", "callable": "m:f",
                                              "prompt": {"file": name, "name": "p"}}])
        assert main(["validate", str(manifest)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "judges[0].prompt.file" in err, err

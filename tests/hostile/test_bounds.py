"""H1–H5 and the messages: every wait and size is bounded, and every mistake is one line.

Bounds are validated limits with documented maxima (docs/operations.md, "Limits"); a provider's wait is
capped at 300 s with a note; a drain (first Ctrl-C / SIGTERM) cancels pending retries."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time

import anyio
import pytest

from babelrun.app.cli import main
from babelrun.engine import limits
from babelrun.judges import judge_spec
from babelrun.judges.http import MAX_RETRY_AFTER_S, bounded_wait
from babelrun.testing import FakeJudgeServer
from helpers import ROOT, request, simulated, write_manifest

KEY_ENV = "BABELRUN_BOUNDS_KEY"


@pytest.mark.parametrize("value", [math.inf, 1e9, 99999 * 3600.0])
def test_a_providers_wait_is_capped(value):
    """H1: Retry-After inf / 1e9 / 99999h pause the account at most 300 s, never forever."""
    assert bounded_wait(value) == (MAX_RETRY_AFTER_S, True)
    assert bounded_wait(-5.0) == (0.0, False) and bounded_wait(float("nan")) == (None, False)

    class Huge(Exception):
        retry_after = value

    assert limits.backoff(1, Huge()) <= MAX_RETRY_AFTER_S + 0.1
    account = limits.Account(("x", "k"), None, None)
    account.pause(value)
    assert account.paused_until - time.monotonic() <= MAX_RETRY_AFTER_S


@pytest.mark.parametrize(("behaviour", "backend"), [("retry_after_inf", "openai"), ("retry_after_huge", "openai"),
                                                     ("retry_after_inf", "anthropic"),
                                                     ("retry_after_inf", "gemini")])
def test_a_huge_retry_after_is_capped_in_the_error(behaviour, backend, monkeypatch):
    """H1 at the wire: each backend's RetryableError carries the capped wait, and says so."""
    from babelrun import judges
    from babelrun.core.items import Item
    from babelrun.judges.base import RetryableError

    monkeypatch.setenv(KEY_ENV, "k")
    item = Item(item_id="i", kind="text", lang="en", ref_id="r", prompt="q", reference="a", perturbed="b",
                perturbation="truncate", severity=0.5, ref_len=1, pert_len=1)
    with FakeJudgeServer(hostile=behaviour) as server:
        judge = judges.build(judge_spec(name="j", backend=backend, model="m", api_key_env=KEY_ENV,
                                       endpoint=server.endpoint(backend)), 0)

        async def one():
            try:
                await judge.judge(request(item, "ref_first"))
            finally:
                await judge.aclose()

        with pytest.raises(RetryableError) as info:
            anyio.run(one)
    assert info.value.retry_after == MAX_RETRY_AFTER_S
    assert "capped at 300 s" in str(info.value)


@pytest.mark.parametrize(("field", "value", "path"), [
    ("judges", [{"name": "s", "backend": "simulated", "concurrency": 1_000_000}], "judges[0].concurrency"),
    ("judges", [{"name": "s", "backend": "simulated", "concurrency": 10**23}], "judges[0].concurrency"),
    ("judges", [{"name": "s", "backend": "openai", "model": "m", "endpoint": "http://127.0.0.1:9/v1",
                 "rate_limit": {"rpm": 1e-9}}], "judges[0].rate_limit.rpm"),
    ("judges", [{"name": "s", "backend": "simulated", "timeout_s": math.inf}], "judges[0].timeout_s"),
    ("scoring", {"bootstrap": 9223372036854775807}, "scoring.bootstrap"),
    ("scoring", {"bootstrap": 100_000_000}, "scoring.bootstrap"),
    ("log", {"segment_mb": math.inf}, "log.segment_mb"),
])
def test_sizes_and_waits_past_their_maxima_are_refused(field, value, path, tmp_path, capsys):
    """H2, H3, H4 and the segment size: refused at validate, exit 2, naming the field."""
    judges = value if field == "judges" else [simulated()]
    extra = {} if field == "judges" else {field: value}
    manifest = write_manifest(tmp_path, judges, **extra)
    assert main(["validate", str(manifest)]) == 2
    err = capsys.readouterr().err
    assert path in err and err.count("\n") == 1


@pytest.mark.parametrize(("output_dir", "problem"), [
    ("out/{nam}", "unknown placeholder '{nam}'"),
    ("out/{", "unbalanced brace"),
    ("{name.__class__}", "unknown placeholder"),
])
def test_output_dir_placeholders(output_dir, problem, tmp_path, capsys):
    manifest = write_manifest(tmp_path, [simulated()], output_dir=output_dir)
    assert main(["validate", str(manifest)]) == 2
    err = capsys.readouterr().err
    assert "output_dir" in err and problem in err
    assert not any(p.name.startswith("<class") for p in tmp_path.iterdir())


def test_an_output_dir_in_the_way_is_named_at_validate(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    for out in ("afile", "afile/run"):
        manifest = write_manifest(tmp_path, [simulated()], output_dir=out)
        assert main(["validate", str(manifest)]) == 2
        assert "output_dir" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_a_read_only_output_dir_is_named_at_validate(tmp_path, capsys):
    (tmp_path / "ro").mkdir(mode=0o500)
    manifest = write_manifest(tmp_path, [simulated()], output_dir="ro/run")
    assert main(["validate", str(manifest)]) == 2
    assert "not writable" in capsys.readouterr().err


def test_command_line_mistakes_are_one_line(tmp_path, capsys):
    manifest = write_manifest(tmp_path, [simulated()], corpus={"sources": [{"kind": "bundled"}],
                                                                  "languages": ["en"], "references_per_language": 1},
                              perturbations=[{"name": "truncate", "severities": [0.5]}])
    assert main(["audit", str(manifest), "--shard", "0/99999999999999999999999"]) == 2
    assert "at most" in capsys.readouterr().err
    assert main(["audit", str(manifest)]) == 0
    capsys.readouterr()
    (tmp_path / "taken").write_text("x")
    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "taken")]) == 2
    assert "is a file" in capsys.readouterr().err
    assert main(["score", str(tmp_path / "run"), "--debug"]) == 0  # --debug after the command


def test_a_drain_cancels_pending_retries(tmp_path):
    """H5: SIGTERM against a server answering 429 with Retry-After 30: the calls waiting to be
    retried end at once (no record; the keys stay undone), the run exits 130 and resumable.
    (Were the retries kept, the process would still be waiting when ``wait`` gives up.)"""
    with FakeJudgeServer(faults=[429] * 1000, retry_after=30) as server:
        spec = {"name": "r", "backend": "openai", "model": "m", "endpoint": server.url, "concurrency": 2,
                "retries": 5}
        manifest = write_manifest(tmp_path, [spec], corpus={"sources": [{"kind": "bundled"}], "languages": ["en"],
                                                            "references_per_language": 2})
        proc = subprocess.Popen([sys.executable, "-m", "babelrun", "audit", str(manifest)], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
        deadline = time.monotonic() + 60
        while server.requests < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # both calls are now in their backoff (Retry-After 30 s)
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=20)
        finally:
            proc.kill()
        requests = server.requests
    assert code == 130
    assert requests == 2  # no retry was sent after the drain


@pytest.mark.parametrize(("yaml_text", "field", "problem"), [
    ("languages_en", "corpus.languages", "a list of language codes"),
    ("tpm_2e5", "judges[0].rate_limit.tpm", "write 200000 or 2.0e+5"),
    ("duplicate", "seed", "given twice"),
    ("typo", "judges[0].concurency", "did you mean 'concurrency'"),
    ("no_perturbations", "perturbations", "at least one perturbation"),
    ("no_languages", "corpus.languages", "at least one language"),
    ("bare_endpoint", "judges[0].endpoint", "names no host"),
    ("und", "corpus.languages[0]", "names no particular language"),
    ("qaa", "corpus.languages[0]", "private-use"),
])
def test_manifest_mistakes_name_their_field(yaml_text, field, problem, tmp_path, capsys):
    judge = "judges: [{name: s, backend: simulated}]"
    remote = "judges: [{name: r, backend: openai, model: m, endpoint: 'http://', rate_limit: {tpm: 2e5}}]"
    text = {
        "languages_en": f"name: t\n{judge}\ncorpus: {{languages: en}}\n",
        "tpm_2e5": "name: t\njudges: [{name: r, backend: openai, model: m, endpoint: 'http://127.0.0.1:9/v1', "
                   "rate_limit: {tpm: 2e5}}]\n",
        "duplicate": f"name: t\n{judge}\nseed: 1\nseed: 2\n",
        "typo": "name: t\njudges: [{name: s, backend: simulated, concurency: 4}]\n",
        "no_perturbations": f"name: t\n{judge}\nperturbations: []\n",
        "no_languages": f"name: t\n{judge}\ncorpus: {{languages: []}}\n",
        "bare_endpoint": f"name: t\n{remote.replace(', rate_limit: {tpm: 2e5}', '')}\n",
        "und": f"name: t\n{judge}\ncorpus: {{languages: [und]}}\n",
        "qaa": f"name: t\n{judge}\ncorpus: {{languages: [qaa]}}\n",
    }[yaml_text]
    path = tmp_path / "m.yaml"
    path.write_text(text)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{field}: " in err and problem in err and err.count("\n") == 1


def test_an_empty_plan_is_refused_not_reported_healthy(tmp_path, capsys):
    (tmp_path / "empty.jsonl").write_text("")
    manifest = write_manifest(tmp_path, [simulated()], corpus={"sources": [{"kind": "jsonl", "path": "empty.jsonl"}]})
    for command in ("validate", "audit"):
        code = main([command, str(manifest)])
        err = capsys.readouterr().err
        assert code == 2 and "no items" in err, err
    assert not (tmp_path / "run" / "cards.json").exists()


def test_a_semicolon_csv_is_read_and_a_missing_column_lists_the_rows_columns(tmp_path, capsys):
    (tmp_path / "refs.csv").write_text("prompt;reference;language\nWhat is 2+2?;Four. It is four.;en\n")
    ok = write_manifest(tmp_path, [simulated()], corpus={"sources": [{"kind": "csv", "path": "refs.csv"}]},
                        perturbations=[{"name": "truncate", "severities": [0.5]}])
    assert main(["validate", str(ok)]) == 0
    capsys.readouterr()
    bad = write_manifest(tmp_path, [simulated()], corpus={"sources": [{"kind": "csv", "path": "refs.csv",
                                                                       "columns": {"prompt": "question"}}]})
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "no text column 'question'" in err and "'prompt', 'reference', 'language'" in err

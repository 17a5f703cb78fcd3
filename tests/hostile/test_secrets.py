"""S1–S5: hostile providers. The canary key never reaches stdout, stderr or any file of the
run directory, whatever a provider (or a proxy in front of it) answers; redirects are not
followed; replies are bounded; provider text reaches the terminal inert.

A 200's reply text is the judge's answer and is kept verbatim (docs/operations.md, "Security notes"):
these behaviours are all error paths."""

from __future__ import annotations

import pytest

from babelrun.app.cli import main
from babelrun.core.text import neutralise
from babelrun.store import log
from babelrun.testing import ESCAPES, FakeJudgeServer
from helpers import files_bytes, write_manifest

CANARY = "sk-CANARY-7f3a9c2e51b84d60a9e2-QxWvRtYpLkJhGfDsMnBz"  # 50 characters
KEY_ENV = "BABELRUN_CANARY_KEY"
BACKENDS = ["openai", "anthropic", "gemini", "groq"]  # groq: a preset of the openai backend
# (behaviour, status) — every error behaviour of the fake server that can carry the key.
BEHAVIOURS = [("echo_key_4xx", 400), ("echo_key_4xx", 401), ("echo_key_4xx", 403), ("echo_key_4xx", 404),
              ("echo_key_5xx", None), ("echo_headers", 400), ("echo_headers", 401), ("redirect", None)]


def _spec(backend: str, server: FakeJudgeServer, **extra) -> dict:
    proto = "openai" if backend == "groq" else backend
    spec = {"name": "remote", "backend": backend, "model": "m", "endpoint": server.endpoint(proto),
            "api_key_env": KEY_ENV, "concurrency": 2, "retries": 1, "timeout_s": 5,
            "max_consecutive_failures": 3}
    spec.update(extra)
    return spec


def _audit(tmp_path, backend, server, capsys, **extra) -> tuple[int, str]:
    path = write_manifest(tmp_path, [_spec(backend, server, **extra)],
                          corpus={"sources": [{"kind": "bundled"}], "languages": ["en"],
                                  "references_per_language": 2},
                          perturbations=[{"name": "truncate", "severities": [0.5]}])
    code = main(["audit", str(path)])
    out, err = capsys.readouterr()
    return code, out + err


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("behaviour", "status"), BEHAVIOURS)
def test_the_canary_key_leaks_nowhere(backend, behaviour, status, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(KEY_ENV, CANARY)
    with FakeJudgeServer() as elsewhere, \
            FakeJudgeServer(hostile=behaviour, hostile_status=status,
                            redirect_to=elsewhere.endpoint("openai") + "/chat/completions") as server:
        code, printed = _audit(tmp_path, backend, server, capsys)
        assert server.requests > 0
        assert elsewhere.requests == 0  # S3: the redirect was not followed, the key not sent on
    assert code == 1
    run = tmp_path / "run"
    assert run.is_dir()
    # Not the key, nor any 8-character piece of it (a cut before masking leaks a head).
    pieces = {CANARY[i:i + 8] for i in range(len(CANARY) - 7)}
    for text in (printed, files_bytes(run).decode("utf-8", "replace")):
        assert not any(p in text for p in pieces)
    records = list(log.read(run))
    assert records and all(r.status == "error" for r in records)
    if behaviour == "redirect":
        assert {r.error_kind for r in records} == {"redirect"} and "not followed" in printed


@pytest.mark.parametrize("backend", ["openai", "anthropic", "gemini"])
def test_an_endless_body_is_cut_at_the_cap_as_oversize(backend, tmp_path, monkeypatch, capsys):
    """S5: a never-ending chunked 200 is read up to 1 MiB, then refused (kind oversize)."""
    monkeypatch.setenv(KEY_ENV, CANARY)
    with FakeJudgeServer(hostile="endless") as server:
        code, printed = _audit(tmp_path, backend, server, capsys, timeout_s=60)
    assert code == 1
    records = list(log.read(tmp_path / "run"))
    assert records and {r.error_kind for r in records} == {"oversize"}
    assert "larger than 1048576 bytes" in records[0].error


def test_a_10_mb_reply_is_oversize_not_a_record(tmp_path, monkeypatch, capsys):
    """D1's cause: a 200 whose verdict text is 10 MB is refused at the cap, never logged."""
    monkeypatch.setenv(KEY_ENV, CANARY)
    with FakeJudgeServer(hostile="huge") as server:
        code, _ = _audit(tmp_path, "openai", server, capsys)
    assert code == 1
    assert {r.error_kind for r in log.read(tmp_path / "run")} == {"oversize"}
    assert max(p.stat().st_size for p in log.segments(tmp_path / "run")) < 100_000


@pytest.mark.parametrize("backend", ["openai", "anthropic", "gemini"])
def test_provider_text_reaches_the_terminal_inert(backend, tmp_path, monkeypatch, capsys):
    """S4: escapes, an OSC title, U+202E and a carriage return in an error message are shown
    as ⟦U+001B⟧ markers, never written raw."""
    monkeypatch.setenv(KEY_ENV, CANARY)
    with FakeJudgeServer(hostile="escapes") as server:
        code, printed = _audit(tmp_path, backend, server, capsys)
    assert code == 1
    for raw in ("\x1b", "\x07", "\u202e", "\r"):
        assert raw not in printed
    assert neutralise(ESCAPES) in printed


def test_judge_names_from_the_manifest_are_printed_inert(tmp_path, capsys):
    path = write_manifest(tmp_path, [{"name": "evil\x1b[2J\u202e", "backend": "simulated"}],
                          corpus={"sources": [{"kind": "bundled"}], "languages": ["en"],
                                  "references_per_language": 1},
                          perturbations=[{"name": "truncate", "severities": [0.5]}])
    assert main(["audit", str(path)]) == 0
    printed = "".join(capsys.readouterr())
    assert "\x1b[2J" not in printed and "\u202e" not in printed and "⟦U+001B⟧[2J" in printed

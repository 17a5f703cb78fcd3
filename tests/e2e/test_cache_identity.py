"""A shared response cache serves a judge only its own replies: two judges that differ only in
a header, the key variable, the organisation or project, or (a code judge) the code, each make
their own calls. Calls are counted at the loopback server (or by the code judge itself)."""

from __future__ import annotations

import sys

import babelrun
from babelrun.store import cache, log
from babelrun.testing import FakeJudgeServer
from helpers import quiet_audit, write_manifest

CORPUS = {"sources": [{"kind": "bundled"}], "languages": ["en"], "references_per_language": 3}


def _audit(folder, judge: dict, store: dict, counted) -> tuple[int, list]:
    """The judge audited in a run directory of its own, on the shared cache ``store``: the calls
    it made (``counted()`` before and after) and its records."""
    folder.mkdir(parents=True, exist_ok=True)
    path = write_manifest(folder, [judge], corpus=CORPUS, cache=store)
    before = counted()
    quiet_audit(path, expect_exit=0)
    return counted() - before, list(log.read(folder / "run"))


# Each differs from the judge before it in one field only (the first from the plain judge).
CHANGES = [{"headers": {"X-Route": "eu"}}, {"headers": {"X-Route": "us"}},
           {"headers": {}, "headers_env": {"X-Route": "BABELRUN_ROUTE"}}, {"headers_env": {}, "organization": "org-2"},
           {"organization": None, "project": "proj-2"}, {"project": None, "api_key_env": "BABELRUN_KEY_A"},
           {"api_key_env": "BABELRUN_KEY_B"}]


def test_judges_differing_only_in_how_they_reach_the_model_share_no_reply(tmp_path, monkeypatch):
    for variable in ("BABELRUN_ROUTE", "BABELRUN_KEY_A", "BABELRUN_KEY_B"):
        monkeypatch.setenv(variable, "value-" + variable)
    store = {"dir": str(tmp_path / "cache")}
    with FakeJudgeServer() as server:
        judge = {"name": "j", "backend": "openai", "model": "m", "endpoint": server.url, "concurrency": 4}
        calls, _ = _audit(tmp_path / "plain", judge, store, lambda: server.requests)
        assert calls > 0
        for i, change in enumerate(CHANGES):
            judge = {k: v for k, v in {**judge, **change}.items() if v not in (None, {})}
            made, records = _audit(tmp_path / f"changed-{i}", judge, store, lambda: server.requests)
            assert made == calls and not any(r.cached for r in records), change  # every call its own
    assert len(cache.stats(tmp_path / "cache")["judges"]) == 1 + len(CHANGES)
    # (the same judge again is served from the cache: test_cache_audit.py, and the code judges below)


def _grader(folder, verdict: str) -> None:
    """A code judge's module, ``grader.py``, answering ``verdict`` and counting its calls."""
    (folder / "grader.py").write_text(f"CALLS = []\n\ndef grade(request):\n    CALLS.append(1)\n"
                                      f"    return {verdict!r}\n")


def _calls() -> int:
    """The calls the module ``grader`` now imported has answered (0 before it is imported)."""
    return len(getattr(sys.modules.get("grader"), "CALLS", []))


def test_a_code_judge_whose_source_changed_is_served_no_old_reply(tmp_path, monkeypatch):
    code = tmp_path / "code"
    code.mkdir()
    monkeypatch.syspath_prepend(str(code))
    monkeypatch.delitem(sys.modules, "grader", raising=False)
    store = {"dir": str(tmp_path / "cache")}
    judge = {"name": "code", "backend": "python", "callable": "grader:grade"}
    _grader(code, "A")
    calls, first = _audit(tmp_path / "a", judge, store, _calls)
    again, cached = _audit(tmp_path / "b", judge, store, _calls)
    assert calls == len(first) > 0 and again == 0 and all(r.cached for r in cached)
    before = _judge_id(tmp_path / "a")

    _grader(code, "B")  # the judge's code changed: a new judge
    del sys.modules["grader"]
    changed, records = _audit(tmp_path / "c", judge, store, _calls)
    assert changed == calls and not any(r.cached for r in records)
    assert {r.raw for r in records} == {"B"} and {r.raw for r in first} == {"A"}
    after = _judge_id(tmp_path / "c")
    assert before != after and set(cache.stats(tmp_path / "cache")["judges"]) == {before, after}


def _judge_id(folder) -> str:
    return babelrun.judges.judge_id(babelrun.load_manifest(folder / "manifest.yaml").judges[0])


def test_a_code_judge_with_a_declared_version_keeps_its_replies_until_the_version_changes(tmp_path, monkeypatch):
    code = tmp_path / "code"
    code.mkdir()
    monkeypatch.syspath_prepend(str(code))
    monkeypatch.delitem(sys.modules, "grader", raising=False)
    store = {"dir": str(tmp_path / "cache")}
    judge = {"name": "code", "backend": "python", "callable": "grader:grade", "version": "1"}
    _grader(code, "A")
    calls, _ = _audit(tmp_path / "a", judge, store, _calls)
    _grader(code, "A ")  # an edit the user declares makes no difference: the same version
    again, cached = _audit(tmp_path / "b", judge, store, _calls)
    assert calls > 0 and again == 0 and all(r.cached for r in cached)
    bumped, records = _audit(tmp_path / "c", {**judge, "version": "2"}, store, _calls)
    assert bumped == calls and not any(r.cached for r in records)

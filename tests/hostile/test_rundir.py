"""D1–D4, W1–W5: a run directory never becomes unusable, and never scores silently wrong.

Bad log lines are skipped and named ``segment:line`` (a warning on stderr, in stats.json),
never a traceback; the Parquet cache is rebuilt when its content stamp differs or it is
garbage; plan.json is rebuilt from run.yaml."""

from __future__ import annotations

import json
import os

import msgspec
import pytest

from babelrun.app.cli import main
from babelrun.errors import RunDirBusy
from babelrun.store import compact, log
from helpers import simulated, write_manifest

BAD_LINES = {
    "random bytes": b"\x8f\x13\xff\xfe garbage \x00\x01",
    "NULs": b"\x00" * 4096,
    "an array": b"[1,2,3]",
    "another object": b'{"foo":1}',
    "a wrong-typed field": None,  # built from a real record below
    "an ok record without a verdict": None,
    "an impossible verdict": None,
    "an impossible slot": None,
}


def _first_segment(run):
    return log.segments(run)[0]


def _corrupt(run, reason: str) -> tuple[str, int]:
    """Replace line 3 of the first segment with a bad line; returns (segment, line)."""
    seg = _first_segment(run)
    lines = seg.read_bytes().split(b"\n")
    record = json.loads(lines[2])
    bad = BAD_LINES[reason]
    if reason == "a wrong-typed field":
        bad = json.dumps({**record, "severity": "high"}).encode()
    elif reason == "an ok record without a verdict":
        bad = json.dumps({k: v for k, v in record.items() if k not in ("verdict", "slot")}).encode()
    elif reason == "an impossible verdict":
        bad = json.dumps({**record, "verdict": "maybe"}).encode()
    elif reason == "an impossible slot":
        bad = json.dumps({**record, "slot": "C"}).encode()
    lines[2] = bad
    seg.write_bytes(b"\n".join(lines))
    return seg.name, 3


@pytest.mark.parametrize("reason", list(BAD_LINES))
def test_a_bad_line_is_skipped_named_and_rejudged(reason, finished, capsys):
    """D2 + W3: audit, score and merge go on; the warning names segment:line; the key whose
    record was lost is judged again; the cards count only valid records."""
    _, manifest, run = finished
    segment, line = _corrupt(run, reason)
    assert main(["score", str(run)]) == 0
    err = capsys.readouterr().err
    assert f"{segment}:{line} (" in err and "invalid log line" in err
    assert "Traceback" not in err
    assert main(["audit", str(manifest)]) == 0  # the lost key is judged again
    out, err = capsys.readouterr()
    assert "1 new records" in out and f"{segment}:{line} (" in err
    stats = json.loads((run / "stats.json").read_bytes())
    assert any(f"{segment}:{line}" in w for w in stats["warnings"])
    assert main(["merge", str(run)]) == 0
    valid = log.final_records(log.read(run))
    assert compact.load(run).num_rows == len(valid)


def test_a_directory_named_like_a_segment_is_ignored(finished, capsys):
    _, manifest, run = finished
    (run / "log" / "x.jsonl").mkdir()
    assert main(["score", str(run)]) == 0
    assert main(["audit", str(manifest)]) == 0


def test_a_10_mb_line_does_not_straddle_arrow_blocks(finished, capsys):
    """D1: one record longer than the reader's block (a 10 MB reply written by an older
    version, or by hand) is read, not an ArrowInvalid at every later start-up."""
    _, manifest, run = finished
    seg = _first_segment(run)
    lines = seg.read_bytes().split(b"\n")
    lines[1] = json.dumps({**json.loads(lines[1]), "raw": "A" * (10 << 20)}).encode()
    seg.write_bytes(b"\n".join(lines))
    before = compact.load(run).num_rows
    os.unlink(run / compact.PARQUET)
    assert main(["score", str(run)]) == 0
    assert compact.load(run).num_rows == before
    assert main(["audit", str(manifest)]) == 0 and main(["merge", str(run)]) == 0


def test_an_edit_that_keeps_the_size_rebuilds_the_cache(finished):
    """W2: flipping verdicts keeps each segment's size; the content stamp still sees it."""
    _, _, run = finished
    before = compact.load(run, ["verdict"])["verdict"].to_pylist()
    seg = _first_segment(run)
    data = seg.read_bytes()
    n = min(20, data.count(b'"verdict":"reference"'))
    flipped = data.replace(b'"verdict":"reference"', b'"verdict":"perturbed"', n)
    assert n > 0 and len(flipped) == len(data)
    st = seg.stat()
    seg.write_bytes(flipped)
    os.utime(seg, ns=(st.st_atime_ns, st.st_mtime_ns))  # even with the old mtime
    assert not compact.is_current(run)
    after = compact.load(run, ["verdict"])["verdict"].to_pylist()
    assert after.count("perturbed") == before.count("perturbed") + n


@pytest.mark.parametrize("garbage", [b"", b"PAR1 not really", os.urandom(4096)])
def test_a_garbage_parquet_is_rebuilt(garbage, finished, capsys):
    """D4: judgements.parquet is only a cache of the log."""
    _, manifest, run = finished
    rows = compact.load(run).num_rows
    (run / compact.PARQUET).write_bytes(garbage)
    assert main(["score", str(run)]) == 0
    assert compact.load(run).num_rows == rows
    (run / compact.PARQUET).write_bytes(garbage)
    assert main(["audit", str(manifest)]) == 0


def test_a_garbage_plan_json_is_rebuilt_and_run_yaml_named(finished, capsys):
    """D4: plan.json is rebuilt from run.yaml; a garbage run.yaml (the only copy of the
    manifest) is one line naming it, exit 1, and audit writes it again."""
    _, manifest, run = finished
    cards = (run / "cards.json").read_bytes()
    (run / "plan.json").write_bytes(b"{not json")
    assert main(["score", str(run)]) == 0
    assert (run / "cards.json").read_bytes() == cards
    (run / "run.yaml").write_bytes(b"\x00\x01: [")
    assert main(["score", str(run)]) == 1
    err = capsys.readouterr().err
    assert "run.yaml is unreadable" in err and "Traceback" not in err and err.count("\n") == 1
    assert main(["audit", str(manifest)]) == 0
    assert main(["score", str(run)]) == 0


def test_orphaned_tmp_files_are_cleaned_and_a_refused_lock_keeps_the_holder(finished):
    """Orphans of a SIGKILL mid-compaction (a dead pid) are removed by the next audit; a
    shard refused its shard lock does not overwrite the run lock's holder text."""
    _, manifest, run = finished
    dead = (run / f"{compact.PARQUET}.999999999.tmp")
    dead.write_bytes(b"half")
    assert main(["audit", str(manifest)]) == 0
    assert not dead.exists()
    shard = log.Shard(0, 2)
    with log.RunLock(run, shard):
        holder = (run / "lock").read_bytes()
        with pytest.raises(RunDirBusy):
            # another process would be refused; in this one flock is per open file: the same
            # (a second descriptor), so the refusal path runs
            log.RunLock(run, shard).__enter__()
        assert (run / "lock").read_bytes() == holder


def test_two_judges_with_one_judge_id_are_refused(tmp_path, capsys):
    """W1: one model under two names would share keys and one card."""
    path = write_manifest(tmp_path, [simulated("a"), simulated("b")])
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "judges[1]" in err and "same judge as judges[0]" in err


def test_score_says_when_planned_keys_are_missing(finished, capsys):
    """W5: a deleted segment leaves keys without a verdict; score says so."""
    _, _, run = finished
    segs = log.segments(run)
    lost = segs[0].read_bytes().count(b"\n")
    segs[0].unlink()
    assert main(["score", str(run)]) == 0
    err = capsys.readouterr().err
    assert f"{lost} of " in err and "planned key(s) have no verdict" in err


def test_stats_record_types_round_trip(finished):
    _, _, run = finished
    stats = msgspec.json.decode((run / "stats.json").read_bytes())
    assert stats["warnings"] == [] or isinstance(stats["warnings"], list)


def test_an_earlier_judge_id_under_the_same_name_is_carded_apart(tmp_path, capsys):
    """W4: after a manifest change the old judge_id's verdicts are not mixed with the new
    one's under one name: they get their own labelled card, and a warning."""
    corpus = {"sources": [{"kind": "bundled"}], "languages": ["en"], "references_per_language": 2}
    perts = [{"name": "truncate", "severities": [0.5]}]
    path = write_manifest(tmp_path, [simulated("j", default_accuracy=0.6)], corpus=corpus, perturbations=perts)
    assert main(["audit", str(path)]) == 0
    path = write_manifest(tmp_path, [simulated("j", default_accuracy=0.9)], corpus=corpus, perturbations=perts)
    assert main(["audit", str(path)]) == 0
    err = capsys.readouterr().err
    cards = json.loads((tmp_path / "run" / "cards.json").read_bytes())
    names = sorted(c["judge"] for c in cards["judges"])
    assert names[0] == "j" and names[1].startswith("j (earlier judge_id ")
    assert "earlier judge_id" in err


def _valid_stats(run) -> dict:
    return json.loads((run / "stats.json").read_bytes())


def _with(stats: dict, path: list, value) -> bytes:
    """``stats`` with the value at ``path`` (keys and indexes) replaced, as JSON bytes."""
    at = stats
    for key in path[:-1]:
        at = at[key]
    at[path[-1]] = value
    return json.dumps(stats).encode()


def _infinite(stats: dict, path: list) -> bytes:
    """``stats`` with ``1e999`` (a JSON number that decodes to infinity) at ``path``."""
    return _with(stats, path, "INFINITE").replace(b'"INFINITE"', b"1e999")


HOSTILE_STATS = {
    "not JSON": lambda s: b"{not json",
    "a negative count": lambda s: _with(s, ["judges", 0, "calls"], -5),
    "a negative duration": lambda s: _with(s, ["elapsed_s"], -1.0),
    "an infinite rate": lambda s: _infinite(s, ["judges", 0, "calls_per_s"]),
    "an infinite latency": lambda s: _infinite(s, ["judges", 0, "latency_ms", "p50"]),
    "a spend of another shape": lambda s: _with(s, ["judges", 0, "spend"], {"currency": "USD", "total": "lots"}),
    "a negative spend": lambda s: _with(s, ["processes", 0, "judges", 0, "spend"], {
        "currency": "USD", "total": -1.0, "by_kind": {}, "calls_by_kind": {}, "by_language": {}}),
    "an array": lambda s: b"[1, 2, 3]",
}


@pytest.mark.parametrize("reason", list(HOSTILE_STATS))
def test_a_hostile_stats_json_is_treated_as_absent(reason, finished, capsys):
    """stats.json in a received run directory is untrusted: one validated reader (typed,
    finite non-negative numbers, the spend's shape). A file that fails it is absent to the
    report (no traceback) and started afresh by the next audit."""
    from babelrun.store.rundir import RunDir

    _, manifest, run = finished
    assert RunDir(run).stats() is not None  # the real one passes the reader
    (run / "stats.json").write_bytes(HOSTILE_STATS[reason](_valid_stats(run)))
    assert RunDir(run).stats() is None
    assert main(["report", str(run)]) == 0
    assert "Traceback" not in capsys.readouterr().err
    assert main(["audit", str(manifest)]) == 0
    after = RunDir(run).stats()
    assert after is not None and len(after.processes) == 1  # the bad file's entries are not carried on

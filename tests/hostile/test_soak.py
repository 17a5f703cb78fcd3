"""A random-corruption soak: 200 small runs, each with one random corruption injected into a
finished run's log (bytes, NULs, a cut, a duplicated or deleted segment, a wrong-typed field),
then ``audit`` + ``score``. No traceback; the cards count exactly the valid records; the
warning names every bad line."""

from __future__ import annotations

import json
import random
import shutil

import pytest

from babelrun.app.cli import main
from babelrun.store import compact, log

KINDS = ("bytes", "nuls", "cut", "duplicate_segment", "delete_segment", "wrong_type")


def _inject(run, rng: random.Random) -> tuple[str, set[str]]:
    """One random corruption; returns its kind and the ``segment:line`` it must name."""
    kind = rng.choice(KINDS)
    segs = log.segments(run)
    seg = rng.choice(segs)
    if kind == "duplicate_segment":
        shutil.copy(seg, seg.with_name("copy-" + seg.name))
        return kind, set()
    if kind == "delete_segment":
        seg.unlink()
        return kind, set()
    lines = seg.read_bytes().split(b"\n")[:-1]
    at = rng.randrange(len(lines))
    if kind == "bytes":
        lines[at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))).replace(b"\n", b"")
    elif kind == "nuls":
        lines[at] = b"\x00" * rng.choice((1, 512, 4096))
    elif kind == "cut":  # a line cut short, as a torn write leaves inside a file
        lines[at] = lines[at][: rng.randrange(1, len(lines[at]) - 1)]
    else:
        record = json.loads(lines[at])
        field = rng.choice(["severity", "ref_len", "attempts", "status", "order", "judge_id", "verdict"])
        if field in ("severity", "ref_len", "attempts"):  # numbers: given something else
            record[field] = rng.choice([[1], {"x": 1}, "high", None if field != "attempts" else "1"])
        else:  # strings (some of a closed set): given something else, or a value outside the set
            record[field] = rng.choice([[1], {"x": 1}, 3.5, True] + (["maybe"] if field != "judge_id" else []))
        lines[at] = json.dumps(record).encode()
    if not lines[at].strip():
        lines[at] = b"\x00"
    seg.write_bytes(b"\n".join(lines) + b"\n")
    return kind, {f"{seg.name}:{at + 1}"}


@pytest.mark.slow
@pytest.mark.parametrize("block", range(10))
def test_random_corruption_soak(block, finished, capsys, tmp_path, monkeypatch):
    """20 corruptions a block, 200 in all, each on a fresh copy of the finished run. (The
    HTML report and its plots are left out: they read the same counted records, and drawing
    them would be most of the soak's time.)"""
    from babelrun.app import audit

    monkeypatch.setattr(audit.report, "write", lambda *a, **k: None)
    folder, manifest, run = finished
    pristine = tmp_path / "pristine"
    shutil.copytree(folder, pristine)
    for i in range(20):
        seed = block * 20 + i
        shutil.rmtree(folder)
        shutil.copytree(pristine, folder)
        rng = random.Random(seed)
        kind, named = _inject(run, rng)
        assert main(["audit", str(manifest)]) == 0, (seed, kind)
        assert main(["score", str(run)]) == 0, (seed, kind)
        out, err = capsys.readouterr()
        assert "Traceback" not in out + err
        valid = log.final_records(log.read(run))
        assert compact.load(run).num_rows == len(valid), (seed, kind)
        cards = json.loads((run / "cards.json").read_bytes())
        assert sum(j["overall"]["presentations"] for j in cards["judges"]) == len(valid) > 0, (seed, kind)
        for where in named:
            assert where in err, (seed, kind, where)

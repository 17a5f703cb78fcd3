"""The keys index of a sealed log segment: a resume reads the keys of the ok
records from ``log/keys/<segment>.keys`` while the segment is still what was indexed (size
and CRC-32), and parses the segment, by the one validity rule, whenever it is not."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from babelrun.store import done as done_module
from babelrun.store import log
from babelrun.store.done import DoneSet


def _record(i: int, status: str = "ok", **fields) -> log.Record:
    item_id = hashlib.blake2b(str(i).encode(), digest_size=10).hexdigest()
    base = dict(judge_id=("ja", "jb")[i % 2], item_id=item_id, order=("ref_first", "pert_first")[i % 3 % 2],
                status=status, judge="j", kind="text", lang="en", perturbation="truncate", severity=0.5,
                ref_len=10, pert_len=5, verdict="reference" if status == "ok" else None,
                slot="A" if status == "ok" else None, raw="A", latency_ms=1.0, ts=1.0)
    base.update(fields)
    return log.Record(**base)


def _parsed(run_dir) -> DoneSet:
    """The done-set from parsing every segment, no index consulted."""
    keys: dict[str, list[np.ndarray]] = {}
    for seg in log.segments(run_dir):
        for jid, bits in log.ok_keys(log.read_segment(seg, log.KEYS)).items():
            keys.setdefault(jid, []).append(bits)
    return DoneSet({j: np.concatenate(v) for j, v in keys.items()})


def _same(a: DoneSet, b: DoneSet) -> bool:
    judges = {"ja", "jb"}
    return len(a) == len(b) and all(np.array_equal(a.keys(j), b.keys(j)) for j in judges)


@pytest.fixture
def small_index(monkeypatch):
    monkeypatch.setattr(log, "INDEX_MIN_BYTES", 1)


def _write(run_dir, records, segment_bytes=4000) -> log.LogWriter:
    writer = log.LogWriter(run_dir, segment_bytes=segment_bytes)
    for start in range(0, len(records), 10):
        writer.write_batch(records[start: start + 10])
        writer.index_sealed()
    writer.close()
    return writer


def test_the_writer_indexes_every_sealed_segment_and_a_resume_reads_them(tmp_path, small_index, monkeypatch):
    records = [_record(i, "ok" if i % 5 else "error") for i in range(400)]
    writer = _write(tmp_path, records)
    segs = log.segments(tmp_path)
    assert len(segs) > 3 and segs == writer.paths
    assert all(log.index_path(s).exists() for s in segs)
    expected = _parsed(tmp_path)
    assert len(expected) == sum(1 for r in records if r.status == "ok")  # distinct keys
    monkeypatch.setattr(done_module, "index_segment", lambda seg: pytest.fail(f"parsed {seg.name}"))
    assert _same(DoneSet.from_log(tmp_path), expected)  # from the indexes alone


def test_a_changed_segment_is_parsed_not_trusted(tmp_path, small_index):
    records = [_record(i) for i in range(200)]
    _write(tmp_path, records)
    first, second, third = log.segments(tmp_path)[:3]
    # An append (another writer, a hand edit), a same-size edit that makes a record invalid,
    # and a repair's cut of a torn line: each changes the size or the CRC-32.
    with first.open("ab") as f:
        f.write(log._encoder.encode(_record(10_001)) + b"\n")
    data = second.read_bytes()
    at = data.index(b'"status":"ok"')
    second.write_bytes(data[:at] + b'"status":"no"' + data[at + len(b'"status":"ok"'):])
    with third.open("ab") as f:
        f.write(b'{"judge_id":"ja","item_id":')
    log.repair(tmp_path)
    for seg in (first, second):
        assert log.read_index(seg) is None
    got = DoneSet.from_log(tmp_path)
    assert _same(got, _parsed(tmp_path))
    assert _record(10_001).key in got
    assert len(got) == len(records)  # one added, one made invalid
    assert log.read_index(first) is not None  # parsed again, and indexed again


def test_a_wrong_typed_field_is_not_done_with_or_without_the_index(tmp_path, small_index):
    records = [_record(i) for i in range(60)]
    _write(tmp_path, records, segment_bytes=1 << 20)
    seg = log.segments(tmp_path)[0]
    bad = log._encoder.encode(_record(999)).replace(b'"latency_ms":1.0', b'"latency_ms":"1.0"')
    with seg.open("ab") as f:
        f.write(bad + b"\n")
    assert log.read_index(seg) is None
    got = DoneSet.from_log(tmp_path)  # parses (and re-indexes) the segment
    assert _record(999).key not in got and len(got) == 60
    assert _same(DoneSet.from_log(tmp_path), got)  # from the new index: the same answer


def test_a_broken_index_is_ignored(tmp_path, small_index):
    _write(tmp_path, [_record(i) for i in range(100)])
    segs = log.segments(tmp_path)
    log.index_path(segs[0]).write_bytes(b"not an index\n")
    log.index_path(segs[1]).write_bytes(log.index_path(segs[1]).read_bytes()[:-8])  # a key short
    assert log.read_index(segs[0]) is None and log.read_index(segs[1]) is None
    assert _same(DoneSet.from_log(tmp_path), _parsed(tmp_path))


def test_small_segments_get_no_index(tmp_path):
    _write(tmp_path, [_record(i) for i in range(50)])
    assert log.segments(tmp_path) and not (tmp_path / "log" / log.INDEX_DIR).exists()
    assert len(DoneSet.from_log(tmp_path)) == 50


def test_a_compaction_indexes_what_the_writer_left_unindexed(tmp_path, small_index, monkeypatch):
    """An audit's writer leaves its last segment to the compaction that follows (one parse of
    it, not two): the index that parse writes is the one ``index_segment`` writes, and a resume
    reads it instead of the segment. A segment that already has an index is not rewritten."""
    from babelrun.store import compact

    records = [_record(i, "ok" if i % 5 else "error") for i in range(400)]
    writer = log.LogWriter(tmp_path, segment_bytes=4000)
    for start in range(0, len(records), 10):
        writer.write_batch(records[start: start + 10])
        if start < 300:
            writer.index_sealed()  # the run's rotations indexed (the writer task does it)
    writer.close(index=False)
    segs = log.segments(tmp_path)
    missing = [s for s in segs if not log.index_path(s).exists()]
    assert missing and missing[-1] == segs[-1] and len(missing) < len(segs)
    kept = {s.name: log.index_path(s).stat().st_mtime_ns for s in segs if s not in missing}
    compact.write_parquet(tmp_path)  # a plain compaction writes no index
    assert not any(log.index_path(s).exists() for s in missing)
    compact.write_parquet(tmp_path, index=True)
    assert all(log.index_path(s).exists() for s in segs)
    assert {s.name: log.index_path(s).stat().st_mtime_ns for s in segs if s not in missing} == kept
    written = {s.name: log.index_path(s).read_bytes() for s in missing}
    for s in missing:
        log.index_path(s).unlink()
        log.index_segment(s)
    assert {s.name: log.index_path(s).read_bytes() for s in missing} == written
    expected = _parsed(tmp_path)
    monkeypatch.setattr(done_module, "index_segment", lambda seg: pytest.fail(f"parsed {seg.name}"))
    assert _same(DoneSet.from_log(tmp_path), expected)


def test_a_segment_growing_under_a_compaction_gets_no_index(tmp_path, small_index, monkeypatch):
    from babelrun.store import compact

    writer = log.LogWriter(tmp_path)
    writer.write_batch([_record(i) for i in range(20)])
    writer.close(index=False)
    (seg,) = log.segments(tmp_path)
    parse = log.stream_segment

    def appended(s, *args, **kwargs):  # another writer appends while the compaction reads
        yield from parse(s, *args, **kwargs)
        with s.open("ab") as f:
            f.write(log._encoder.encode(_record(99)) + b"\n")

    monkeypatch.setattr(log, "stream_segment", appended)
    compact.write_parquet(tmp_path, index=True)
    assert not log.index_path(seg).exists()

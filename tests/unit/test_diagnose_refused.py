"""``diagnose.refused`` column-wise (no Python loop per logged record) says what the
row-by-row definition says: per judge, its logged calls, those that ended ``rejected``, and
the first rejected messages in log order (cut, terminal-safe), over several segments and
blocks; and so does the report's one pass over the log (its statistics and the refusals)."""

from __future__ import annotations

import hashlib

import pyarrow as pa

from babelrun.core.text import neutralise
from babelrun.report import data as report_data
from babelrun.score import diagnose
from babelrun.store import log


def _record(i: int) -> log.Record:
    jid = ("ja", "jb", "jc")[i % 3]
    rejected = jid != "jc" and i % (2 if jid == "ja" else 7) == 0
    status = "error" if rejected or i % 11 == 0 else "ok"
    error = None if status == "ok" or i % 4 == 0 else f"HTTP 400 \x1b[31mbad\x1b[0m request {i} " + "x" * 300
    return log.Record(judge_id=jid, item_id=hashlib.blake2b(str(i).encode(), digest_size=10).hexdigest(),
                      order="ref_first", status=status, judge=f"name-{jid}", kind="text", lang="en",
                      perturbation="truncate", severity=0.5, ref_len=10, pert_len=5,
                      verdict="reference" if status == "ok" else None, slot="A" if status == "ok" else None,
                      error_kind=("rejected" if rejected else "server") if status == "error" else None,
                      error=error, raw="A", latency_ms=1.0, ts=1.0)


def _row_by_row(run_dir) -> list[diagnose.Diagnosis]:
    tally: dict = {}
    for seg in log.segments(run_dir):
        for batch in log.stream_segment(seg, diagnose.LOG_SCHEMA):
            for row in pa.Table.from_batches([batch]).to_pylist():
                t = tally.setdefault(row["judge_id"], [row["judge"], 0, 0, []])
                t[1] += 1
                if row["status"] == "error" and row["error_kind"] == "rejected":
                    t[2] += 1
                    if len(t[3]) < diagnose.EXAMPLES:
                        t[3].append(neutralise((row["error"] or "")[:diagnose.EXAMPLE_CHARS]))
    return [diagnose.Diagnosis(name, jid, "refused", round(k / n, 4), k, n, examples=first)
            for jid, (name, n, k, first) in sorted(tally.items()) if n and k / n > diagnose.MISCONFIGURED]


def test_refused_column_wise_is_the_row_by_row_definition(tmp_path, monkeypatch):
    writer = log.LogWriter(tmp_path, segment_bytes=30_000)  # several segments
    records = [_record(i) for i in range(600)]
    for start in range(0, len(records), 25):
        writer.write_batch(records[start: start + 25])
    writer.close()
    assert len(log.segments(tmp_path)) > 2
    parse = log.stream_segment
    monkeypatch.setattr(log, "stream_segment",  # small blocks: a judge's rows span several batches
                        lambda seg, schema, **kw: parse(seg, schema, block_bytes=8_000, **kw))
    found = diagnose.refused(tmp_path)
    assert found == _row_by_row(tmp_path)
    assert report_data._log_pass(tmp_path)[1] == found  # the report's one pass over the log finds the same
    assert [d.judge_id for d in found] == ["ja"]  # half of ja's calls rejected; jb's a seventh; jc none
    assert len(found[0].examples) == diagnose.EXAMPLES and "\x1b" not in "".join(found[0].examples)

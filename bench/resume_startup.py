"""Resume start-up on a 1,000,000-record log: repairing the log and rebuilding the done-set
(what `babelrun audit` does before its first call), against the straightforward way —
decode every record whole and keep a Python set of key tuples. babelrun twice: with the
segments' keys indexes (as the log writer leaves sealed segments) and without (a log from
before the index, or a writer killed before it sealed: every segment parsed). Rounds
alternate; prints medians, ranges and the Python heap's peak of each (target: >= 2x).

    python bench/resume_startup.py [--records 1000000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import hashlib
import random
import shutil
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

import msgspec

from babelrun.store import log
from babelrun.store.done import DoneSet

LANGS = [f"l{i:02d}" for i in range(65)]
PERTS = ["truncate", "shuffle", "number_corrupt", "drop_entities", "repeat_pad"]


def _item_id(n: int) -> str:
    return hashlib.blake2b(str(n).encode(), digest_size=10).hexdigest()  # as items.item_id


def write_log(run_dir: Path, n: int) -> int:
    """``n`` records over 4 segments: 2 judges, ~3 % errors, the rest ok."""
    rng = random.Random(0)
    encoder = msgspec.json.Encoder()
    (run_dir / "log").mkdir(parents=True)
    size = 0
    per_segment = n // 4 + 1
    for s in range(4):
        buf = bytearray()
        for i in range(s * per_segment, min(n, (s + 1) * per_segment)):
            ok = rng.random() > 0.03
            rec = log.Record(
                judge_id=("a1b2c3d4e5f6", "0f9e8d7c6b5a")[i % 2], item_id=_item_id(i // 4),
                order=("ref_first", "pert_first")[(i // 2) % 2], status="ok" if ok else "error",
                judge=("one", "two")[i % 2], kind="text", lang=LANGS[i % 65], ref_id=f"r{i // 40}",
                perturbation=PERTS[i % 5],
                severity=0.3, ref_len=400, pert_len=250, verdict="reference" if ok else None,
                slot="A" if ok else None, raw="A" if ok else None, latency_ms=812.5, tokens_in=420,
                tokens_out=1, served_model="gpt-4o-mini-2024-07-18", fingerprint="fp_abc123",
                error_kind=None if ok else "server_error", error=None if ok else "HTTP 503",
                ts=1764460800.0 + i)
            encoder.encode_into(rec, buf, len(buf))
            buf += b"\n"
        path = run_dir / "log" / f"host-1-20261130T000000-{s:04d}.jsonl"
        path.write_bytes(buf)
        size += len(buf)
    return size


def timed_peak(fn):
    """Time one call, then measure the Python heap's peak on a second (tracemalloc slows
    allocation, so it must not be on during the timed one). Arrow's own buffers are not on
    Python's heap: babelrun's peak here is its NumPy and Python side only."""
    started = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - started
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return result, elapsed, peak


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        size = write_log(run_dir, args.records)
        index = run_dir / "log" / log.INDEX_DIR

        def unindexed():  # a log from before the keys index, or a writer killed before it sealed
            shutil.rmtree(index, ignore_errors=True)
            log.repair(run_dir)
            return DoneSet.from_log(run_dir)  # parses every segment (and indexes it)

        def indexed():  # the segments as a LogWriter leaves them: sealed, each with its index
            log.repair(run_dir)
            return DoneSet.from_log(run_dir)

        def naive():
            return {r.key for r in log.read(run_dir) if r.status == "ok"}

        times: dict[str, list[float]] = {"naive": [], "unindexed": [], "indexed": []}
        peaks: dict[str, int] = {}
        for _ in range(args.rounds):  # alternating: the machine's load moves between rounds
            for name, fn in (("naive", naive), ("unindexed", unindexed), ("indexed", indexed)):
                result, elapsed, peak = timed_peak(fn)
                times[name].append(elapsed)
                peaks[name] = max(peaks.get(name, 0), peak)
                if name == "naive":
                    naive_set = result
                else:
                    assert len(result) == len(naive_set)
                    assert all(key in result for key in list(naive_set)[:: max(1, len(naive_set) // 1000)])
                    done = result
        index_mb = sum(f.stat().st_size for f in index.iterdir()) / 2**20
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"records={args.records} log={size / 2**20:.0f}MB ok_keys={len(done)} rounds={args.rounds} "
          f"(medians; range over rounds)")
    for name in times:
        print(f"{name}: {med[name]:.2f}s ({min(times[name]):.2f}-{max(times[name]):.2f}) "
              f"peak {peaks[name] / 2**20:.0f}MB")
    print(f"done-set {done.nbytes / 2**20:.1f}MB; index files {index_mb:.1f}MB")
    print(f"resume_startup_speedup={med['naive'] / med['indexed']:.2f}x (indexed)  "
          f"{med['naive'] / med['unindexed']:.2f}x (unindexed)  memory_ratio={peaks['naive'] / peaks['indexed']:.1f}x  "
          f"(naive ÷ babelrun; target: >= 2x)")


if __name__ == "__main__":
    main()

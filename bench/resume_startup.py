"""Resume start-up on a 1,000,000-record log: repairing the log and rebuilding the done-set
(what `babelrun audit` does before its first call), against the straightforward way —
decode every record whole and keep a Python set of key tuples. Prints the speed-up and
the memory of both (target: babelrun under 3 s).

    python bench/resume_startup.py [--records 1000000]
"""

from __future__ import annotations

import argparse
import hashlib
import random
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
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        size = write_log(run_dir, args.records)

        def ours():
            log.repair(run_dir)
            return DoneSet.from_log(run_dir)

        def naive():
            return {r.key for r in log.read(run_dir) if r.status == "ok"}

        naive_set, naive_s, naive_peak = timed_peak(naive)
        done, ours_s, ours_peak = timed_peak(ours)
        assert len(done) == len(naive_set)
    print(f"records={args.records} log={size / 2**20:.0f}MB ok_keys={len(done)}")
    print(f"naive: {naive_s:.2f}s peak {naive_peak / 2**20:.0f}MB | babelrun: {ours_s:.2f}s "
          f"peak {ours_peak / 2**20:.0f}MB, done-set {done.nbytes / 2**20:.1f}MB")
    print(f"resume_startup_speedup={naive_s / ours_s:.2f}x  memory_ratio={naive_peak / ours_peak:.1f}x  "
          f"(naive ÷ babelrun; target: babelrun < 3 s)")


if __name__ == "__main__":
    main()

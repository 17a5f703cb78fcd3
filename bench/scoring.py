"""Scoring speed: babelrun's columnar scoring vs a straightforward per-record Python loop that
computes the same point estimates (accuracy, Δ, κ_ord, v, R per judge × language ×
perturbation and per judge × language). Prints one ratio (target >= 30).

    python bench/scoring.py [--records 1000000]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from babelrun.score import SCORING_COLUMNS, score
from babelrun.score.metrics import LENGTH_GAP
from babelrun.store import compact
from babelrun.store.compact import DICTIONARY_COLUMNS

LANGS = [f"l{i:02d}" for i in range(65)]
PERTS = ["truncate", "shuffle", "number_corrupt", "drop_entities", "repeat_pad"]


def synthetic(n_records: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    n_items = n_records // 2
    lang = rng.integers(0, len(LANGS), n_items)
    pert = rng.integers(0, len(PERTS), n_items)
    ref_len = rng.integers(200, 600, n_items)
    pert_len = np.where(pert == 4, ref_len * 2, np.where(pert == 0, ref_len // 2, ref_len))
    verdict = rng.choice(np.array(["reference", "perturbed", "tie", "invalid"]), size=n_records,
                         p=[0.7, 0.2, 0.05, 0.05])
    idx = np.repeat(np.arange(n_items), 2)
    return pa.table({
        "judge_id": pa.array(np.where(idx % 2 == 0, "j1", "j2")),
        "judge": pa.array(np.where(idx % 2 == 0, "one", "two")),
        "item_id": pa.array([hashlib.blake2b(str(i).encode(), digest_size=10).hexdigest() for i in idx]),
        "order": pa.array(np.tile(np.array(["ref_first", "pert_first"]), n_items)),
        "lang": pa.array(np.array(LANGS)[lang][idx]),
        "perturbation": pa.array(np.array(PERTS)[pert][idx]),
        "verdict": pa.array(verdict),
        "status": pa.array(np.full(n_records, "ok")),
        "ref_len": pa.array(ref_len[idx]),
        "pert_len": pa.array(pert_len[idx]),
    })


def python_loop(rows: list[dict]) -> dict:
    """The straightforward way: one pass over records, dictionaries of counters."""
    cells = defaultdict(lambda: defaultdict(float))
    pairs = defaultdict(dict)
    for r in rows:
        keys = [(r["judge_id"], r["lang"], r["perturbation"]), (r["judge_id"], r["lang"], "*")]
        v, order = r["verdict"], r["order"]
        decisive = v in ("reference", "perturbed")
        correct = v == "reference"
        slot_a = decisive and (correct == (order == "ref_first"))
        rl, pl = r["ref_len"], r["pert_len"]
        differs = abs(rl - pl) / max(rl, pl, 1) >= LENGTH_GAP
        longer_ref = rl > pl
        chose_longer = decisive and (correct == longer_ref)
        for k in keys:
            c = cells[k]
            c["n"] += 1
            c["correct"] += correct
            c["a"] += slot_a
            c["b"] += decisive and not slot_a
            if differs and decisive:
                side = "lb" if longer_ref else "lw"
                c[side + "_n"] += 1
                c[side + "_long"] += chose_longer
        pairs[(r["judge_id"], r["item_id"])][order] = (v, keys)
    for (_, _), seen in pairs.items():
        if len(seen) == 2:
            (v1, keys), (v2, _) = seen["ref_first"], seen["pert_first"]
            for k in keys:
                cells[k]["pairs"] += 1
                cells[k]["consistent"] += v1 == v2 and v1 in ("reference", "perturbed")
    out = {}
    for k, c in cells.items():
        acc = c["correct"] / c["n"]
        delta = (c["a"] - c["b"]) / c["n"]
        kappa = c["consistent"] / c["pairs"] if c["pairs"] else float("nan")
        if c["lw_n"] and c["lb_n"]:
            v = 0.5 * (c["lw_long"] / c["lw_n"] + c["lb_long"] / c["lb_n"])
            length = 1 - 0.7 * max(0.0, 2 * v - 1)
        else:
            length = 1.0
        out[k] = (0.6 * acc + 0.4 * kappa) * (1 - 0.8 * abs(delta)) * length
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=1_000_000)
    args = p.parse_args()
    data = synthetic(args.records)
    rows = data.to_pylist()  # the baseline gets its rows in memory, for free

    started = time.perf_counter()
    baseline = python_loop(rows)
    loop_s = time.perf_counter() - started

    with tempfile.TemporaryDirectory() as tmp:
        # babelrun scores from judgements.parquet: its time includes reading the file.
        path = Path(tmp) / "judgements.parquet"
        pq.write_table(compact.counted(data), path)  # as compaction writes it

        present = set(pq.read_schema(path).names)  # the synthetic records carry no kind, p_a, score…
        columns = [c for c in SCORING_COLUMNS if c in present]

        def read() -> pa.Table:
            return pq.read_table(path, columns=columns, read_dictionary=[c for c in DICTIONARY_COLUMNS if c in columns])

        times = []
        for _ in range(5):  # a 0.3 s run is at the mercy of the machine: take the median of 5
            started = time.perf_counter()
            cards = score(read(), [], replicates=0)
            times.append(time.perf_counter() - started)
        ours_s = statistics.median(times)
        started = time.perf_counter()
        score(read(), [], replicates=1000)
        boot_s = time.perf_counter() - started

    # Same numbers both ways (a benchmark of a wrong answer is worthless).
    for jc in cards.judges:
        for lc in jc.languages:
            assert abs(lc.card.reliability.value - baseline[(jc.judge_id, lc.lang, "*")]) < 1e-3
            for pc in lc.perturbations:
                assert abs(pc.card.reliability.value - baseline[(jc.judge_id, lc.lang, pc.perturbation)]) < 1e-3
    print(f"records={args.records} python_loop={loop_s:.2f}s babelrun={ours_s:.2f}s "
          f"babelrun_with_1000_bootstrap_replicates={boot_s:.2f}s")
    print(f"scoring_speedup={loop_s / ours_s:.1f}x  (per-record Python loop ÷ babelrun; target >= 30)")


if __name__ == "__main__":
    main()

"""Agentic scoring cost: the same synthetic records scored as agentic items (the agentic
cards: family, length-probe and per-perturbation passes of ``score.cells``, R_agent's
bootstrap) ÷ scored as text items (the text cards). Prints one ratio; median of 3.

    python bench/agentic_scoring.py [--records 1000000] [--replicates 0]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scoring import synthetic  # bench/scoring.py: 65 languages, two judges, both orders

from babelrun.agentic import AGENTIC_PERTURBATIONS
from babelrun.score import score
from babelrun.store import compact
from babelrun.store.compact import DICTIONARY_COLUMNS

NAMES = ["agent:" + n for n in AGENTIC_PERTURBATIONS]


def as_kind(data: pa.Table, kind: str) -> pa.Table:
    """The records with nine perturbation names (an item keeps its name) and ``kind``."""
    item = pc.cast(pc.divide(pa.array(np.arange(data.num_rows)), 2), pa.int64()).to_numpy()
    names = np.array(NAMES if kind == "agentic" else [n.removeprefix("agent:") for n in NAMES])
    data = data.set_column(data.schema.get_field_index("perturbation"), "perturbation",
                           pa.array(names[item % len(names)]))
    data = compact.counted(data.append_column("kind", pa.array(np.full(data.num_rows, kind))))
    # As scoring reads judgements.parquet: item_key computed, small string columns as dictionaries.
    for name in DICTIONARY_COLUMNS:
        if name in data.column_names:
            data = data.set_column(data.schema.get_field_index(name), name, pc.dictionary_encode(data[name]))
    return data


def timed(data: pa.Table, replicates: int) -> tuple[float, object]:
    times, cards = [], None
    for _ in range(3):
        started = time.perf_counter()
        cards = score(data, [], replicates=replicates)
        times.append(time.perf_counter() - started)
    return statistics.median(times), cards


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--replicates", type=int, default=0)
    args = p.parse_args()
    base = synthetic(args.records)
    text_s, text_cards = timed(as_kind(base, "text"), args.replicates)
    agentic_s, agentic_cards = timed(as_kind(base, "agentic"), args.replicates)
    assert text_cards.judges and not text_cards.agentic
    assert agentic_cards.agentic and not agentic_cards.judges
    # The same verdicts: the all-languages agentic card has every item of its judge.
    for t, a in zip(text_cards.judges, agentic_cards.agentic, strict=True):
        assert a.overall.items == t.overall.items and a.overall.position_bias.value == t.overall.position_bias.value
    print(f"records={args.records} replicates={args.replicates} text={text_s:.2f}s agentic={agentic_s:.2f}s")
    print(f"agentic_cost={agentic_s / text_s:.2f}x  (agentic cards ÷ text cards, same records)")


if __name__ == "__main__":
    main()

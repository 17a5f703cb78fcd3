"""babelrun's sentence segmentation (``regex`` + script rules) against PyICU's sentence
BreakIterator over every UDHR unit of ``../shared/data/udhr-all``: time for one pass (cache
cleared) and the ratio regex / ICU, and per script the mean sentences per unit each finds.

    python bench/segmentation.py [--data ../shared/data] [--icu-path DIR]

PyICU is not a dependency (it builds from source against ICU headers); ``--icu-path`` adds a
folder where it was installed (``pip install --target DIR pyicu``). Without it, only the
regex side is timed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    p.add_argument("--icu-path", type=Path)
    args = p.parse_args()
    if args.icu_path:
        sys.path.insert(0, str(args.icu_path))
    from babelrun.core import languages
    from babelrun.corpus import udhr
    from babelrun.perturb import script

    texts = [(lang, r.response) for lang, refs in udhr.units(args.data / "udhr-all").items() for r in refs]
    script._sentences.cache_clear()
    started = time.perf_counter()
    ours = [len(script._split(t)) for _, t in texts]
    regex_s = time.perf_counter() - started
    try:
        import icu
    except ImportError:
        icu = None
    theirs, icu_s = None, None
    if icu is not None:
        bi = icu.BreakIterator.createSentenceInstance(icu.Locale.getRoot())

        def count(text: str) -> int:
            bi.setText(text)
            return sum(1 for _ in bi)

        started = time.perf_counter()
        theirs = [count(t) for _, t in texts]
        icu_s = time.perf_counter() - started
    print(f"units {len(texts)}; regex {regex_s:.2f} s"
          + (f"; ICU {icu_s:.2f} s; ratio regex/ICU {regex_s / icu_s:.1f}" if icu_s else "; ICU not installed"))
    by: dict[str, list] = defaultdict(lambda: [0, 0, 0])
    for i, (lang, _) in enumerate(texts):
        row = by[languages.script(lang)]
        row[0] += 1
        row[1] += ours[i]
        row[2] += theirs[i] if theirs else 0
    print("script units regex icu")
    for name, (n, a, b) in sorted(by.items(), key=lambda kv: -kv[1][0]):
        print(name, n, f"{a / n:.2f}", f"{b / n:.2f}" if theirs else "–")


if __name__ == "__main__":
    main()

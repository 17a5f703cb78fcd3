"""A judge you can pin: ``babelrun pin`` writes a lock file, ``babelrun check`` re-asks it.

A judge calibrated against human labels describes one instrument; a provider's silent model
update makes it another. The lock file pins the instrument like a dependency: per judge, its
identity (judge_id, backend, model, endpoint, the prompt template and a hash of its text,
the served model and fingerprint the records report), the date, its accuracy on the run's
labelled pairs (and its agreement with human labels, with ``--labels``), and a small fixed
**canary set**: items of the run with the verdicts it recorded in both orders.

``check`` re-asks the canary set (a few dozen calls, through the audit's own call path:
rate limits, retries), compares each presentation's new verdict with the recorded one, and
reports per judge two exact tests and the identity:

- McNemar on correctness (b: right then, wrong now; c: the reverse): did accuracy move?
- the verdict flips against the tolerated flip rate (``tolerance``, 0.05 by default: a
  provider's sampling is not perfectly repeatable even at temperature 0), one-sided exact
  binomial: did the judge change its mind more than noise explains? A judge that flips
  answers both ways keeps its accuracy, so McNemar alone would miss it;
- the served model, fingerprint, judge_id and prompt text against the pinned ones.

It exits 1 when a judge drifted (either p < alpha), its identity changed, or canary calls
failed, and appends its result to the lock file, which so becomes the judge's changelog.
Made for CI on a schedule.

A lock file is data (it is committed and shared; docs/trust.md): ``check`` never builds a
judge from it. The judges are built from the user's manifest (``check LOCK --manifest M``);
the lock supplies the identity to compare and the canaries to re-ask. A judge whose
identity differs (judge_id, the template's text, or any of ``BOUND_FIELDS``: where the key
goes, which code runs) is reported as changed **before any call**, and none is made for it.
The lock file's format, reads and writes are in ``lockfile.py``; the re-asking and the tests
in ``recheck.py``.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from .. import corpus
from ..core.records import ORDERS
from ..core.version import __version__
from ..errors import NotApplicable
from ..judges.protocol import template_of
from ..plan.lookup import lookup
from ..score import Interval, stats
from ..spec import JudgeSpec
from ..store import compact
from ..store.rundir import RunDir
from .lockfile import Canary, LockedJudge, LockFile, check_numbers, timestamp

_COLUMNS = ["judge_id", "judge", "item_id", "kind", "lang", "ref_id", "perturbation", "severity", "order",
            "verdict", "served_model", "fingerprint", "score"]


def _template_name(spec: JudgeSpec) -> str:
    t = template_of(spec)
    return f"{t.name}@v{t.version}"


def template_sha(spec: JudgeSpec) -> str:
    t = template_of(spec)
    texts = [t.system, t.user, *(s + "\x1f" + u for _, (s, u) in sorted(t.translations.items()))]
    return hashlib.blake2b("\x1e".join(texts).encode(), digest_size=12).hexdigest()


def most_common(values: list) -> str | None:
    values = [v for v in values if v]
    return Counter(values).most_common(1)[0][0] if values else None


def _canary_ids(mine: pa.Table, n: int, seed: int) -> list[str]:
    """n items judged in both orders, in a seeded hash order (the same n for the same run)."""
    orders = Counter(mine["item_id"].to_pylist())
    both = [i for i, k in orders.items() if k == len(ORDERS)]
    return sorted(both, key=lambda i: hashlib.blake2b(f"{seed}\x1f{i}".encode(), digest_size=8).digest())[:n]


def _labelled_accuracy(mine: pa.Table) -> Interval | None:
    kind = mine["kind"].cast(pa.string())
    labelled = mine.filter(pc.is_in(kind, pa.array(["labelled", "labelled_tie"])))
    if not labelled.num_rows:
        return None
    # a tie-labelled pair (kind labelled_tie) is right when the judge says tie
    wanted = pc.if_else(pc.equal(labelled["kind"].cast(pa.string()), "labelled_tie"), "tie", "reference")
    right = pc.sum(pc.equal(labelled["verdict"].cast(pa.string()), wanted)).as_py() or 0
    lo, hi = stats.wilson(right, labelled.num_rows)
    return Interval(round(right / labelled.num_rows, 4), round(float(lo), 4), round(float(hi), 4), labelled.num_rows)


def pin(run_dir: Path, canary: int = 24, alpha: float = 0.05, labels: Path | None = None,
        tolerance: float = 0.05) -> LockFile:
    """The lock file of every judge of a finished run (composites make no calls: not pinned)."""
    check_numbers(canary, alpha, tolerance)
    info = RunDir(run_dir).info()
    manifest = info.manifest
    data = compact.load(Path(run_dir), _COLUMNS)
    if not data.num_rows:
        raise NotApplicable(f"{run_dir}: no successful records to pin")
    chosen = corpus.select(manifest)
    agreement = {}
    if labels is not None:
        from ..analyses import agree

        agreement = {j.judge: j.sets for j in agree.run(run_dir, labels).judges}
    locked = []
    for spec in manifest.judges:
        jid = info.judge_ids[spec.name]
        mine = data.filter(pc.equal(data["judge_id"].cast(pa.string()), jid))
        if not mine.num_rows or spec.calls == "escalations":
            continue  # nothing recorded, or only a hard subset: no canary to compare
        ids = _canary_ids(mine, canary, manifest.seed)
        rows = mine.filter(pc.is_in(mine["item_id"].cast(pa.string()), pa.array(ids))).to_pylist()
        items = lookup(manifest, chosen, rows)
        verdicts: dict[str, dict[str, str]] = {}
        scores: dict[str, dict[str, float | None]] = {}
        for r in rows:
            verdicts.setdefault(r["item_id"], {})
            if spec.protocol == "pointwise":
                scores.setdefault(r["item_id"], {})[r["order"]] = r["score"]
            else:
                verdicts[r["item_id"]][r["order"]] = r["verdict"]
        canaries = [Canary(items[i], verdicts[i], scores.get(i, {})) for i in ids if i in items]
        locked.append(LockedJudge(
            spec.name, jid, spec, _template_name(spec),
            template_sha(spec), most_common(mine["served_model"].to_pylist()),
            most_common(mine["fingerprint"].to_pylist()), _labelled_accuracy(mine),
            agreement.get(spec.name, []), canaries))
    if not locked:
        raise NotApplicable(f"{run_dir}: no judge with records to pin")
    return LockFile(__version__, timestamp(), str(Path(run_dir).resolve()), alpha, locked, tolerance,
                    seed=manifest.seed)

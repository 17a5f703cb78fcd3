"""A judge you can pin: ``babelrun pin`` writes a lock file, ``babelrun check`` re-asks it.

A judge calibrated against human labels describes one instrument; a provider's silent model
update makes it another. The lock file pins the instrument like a dependency: per judge, its
identity (judge_id, backend, model, endpoint, the prompt template and a hash of its text,
the served model and fingerprint the records report), the date, its accuracy on the run's
labelled pairs (and its agreement with human labels, with ``--labels``), and a small fixed
**canary set**: items of the run with the verdicts it recorded in both orders.

Judges are sampled: with ``--manifest``, ``pin`` asks each canary presentation ``repeats``
more times of the manifest's judge and records its **self-flip rate** (``SelfFlip``: the
share of re-asks whose answer differs from the pinned one, with an item-bootstrap interval),
the rate an unchanged judge's check flips at (a re-ask and a check's answer are both fresh
draws compared with the same pinned draw). A judge the run asked ``samples: k`` > 1 already
holds such draws: its pinned answers are sample 0's and its later samples are the re-asks
(``samples_self_flip``), so no call is made for it, with or without ``--manifest``.

``check`` re-asks the canary set (a few dozen calls, through the audit's own call path:
rate limits, retries), compares each presentation's new verdict with the recorded one, and
reports per judge two exact tests, each at alpha / 2, and the identity:

- McNemar on correctness (b: right then, wrong now; c: the reverse): did accuracy move, and
  which way?
- the verdict flips, one-sided: against the pin's flipped re-asks (Fisher exact), or, for a
  lock without a self-flip rate, against the tolerated flip rate (``tolerance``, 0.05, exact
  binomial): did the judge change its mind more than its own noise explains? A judge that
  flips answers both ways keeps its accuracy, so McNemar alone would miss it;
- the served model, fingerprint, judge_id and prompt text against the pinned ones.

It exits 1 when a judge drifted (either p < alpha / 2), its identity changed, or canary calls
failed, and appends its result to the lock file, which so becomes the judge's changelog.
Made for CI on a schedule.

A lock file is data (it is committed and shared; docs/trust.md): ``check`` never builds a judge
from it, and ``pin`` never builds one from the run directory. The judges are built from the
user's manifest (``check LOCK --manifest M``, ``pin RUN --manifest M``); the lock supplies the
identity to compare and the canaries to re-ask. A judge whose identity differs (judge_id, the
template's text, or any of ``BOUND_FIELDS``: where the key goes, which code runs) is reported
as changed **before any call**, and none is made for it.
The lock file's format, reads and writes are in ``lockfile.py``; the re-asking and the tests
in ``recheck.py``.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path
from typing import Literal

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import corpus
from ..core.records import ORDERS
from ..core.version import __version__
from ..errors import NotApplicable, UsageError
from ..judges.protocol import Judging, template_of
from ..plan.lookup import lookup
from ..score import Interval, stats
from ..spec import JudgeSpec, Manifest
from ..store import compact
from ..store.rundir import RunDir
from . import recheck
from .lockfile import (
    MAX_REPEATS,
    Canary,
    LockedJudge,
    LockFile,
    SelfFlip,
    check_numbers,
    most_common,
    template_sha,
    timestamp,
)

SELF_FLIP_REPLICATES = 2000  # the bootstrap of the self-flip rate's interval (canary items resampled)

_COLUMNS = ["judge_id", "judge", "item_id", "kind", "lang", "ref_id", "perturbation", "severity", "order",
            "verdict", "served_model", "fingerprint", "score", "sample"]


def _template_name(spec: JudgeSpec) -> str:
    t = template_of(spec)
    return f"{t.name}@v{t.version}"


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


def _self_flip(flips: np.ndarray, asked: np.ndarray, repeats: int, seed: int,
               source: Literal["re-asks", "samples"] = "re-asks") -> SelfFlip | None:
    """Re-asks differing from the pinned answer, per canary item, as a rate with a percentile
    bootstrap interval over items (an item's re-asks share its pinned answers)."""
    total = int(asked.sum())
    if not total:
        return None
    rng = np.random.default_rng([seed, 0x5E1F])
    draw = rng.integers(0, len(asked), size=(SELF_FLIP_REPLICATES, len(asked)))
    n = asked[draw].sum(axis=1)
    rates = flips[draw].sum(axis=1)[n > 0] / n[n > 0]
    lo, hi = np.quantile(rates, [0.025, 0.975])
    k = int(flips.sum())
    return SelfFlip(repeats, total, k, round(k / total, 4), round(float(lo), 4), round(float(hi), 4), source)


def measure_self_flip(locked: LockedJudge, spec: JudgeSpec, repeats: int, seed: int) -> LockedJudge:
    """``locked`` with each canary presentation asked ``repeats`` more times of ``spec`` (the
    manifest's judge), the re-asks kept on its canaries and the self-flip rate they show."""
    records, stopped = recheck.ask(locked, spec, seed, repeats)
    if stopped:
        raise UsageError(f"pin: judge {locked.name!r}'s canary calls stopped: {stopped}")
    pinned = recheck.pinned_answers(locked, spec)
    pointwise = locked.spec.protocol == "pointwise"
    keys = Judging.of(spec).keys
    flips, asked = np.zeros(len(locked.canary), np.int64), np.zeros(len(locked.canary), np.int64)
    canaries = []
    for i, c in enumerate(locked.canary):
        again: dict[str, list] = {}
        for j, key in enumerate(keys):
            at = i * len(keys) + j
            has, then = pinned[at]
            if not has:
                continue
            rounds = [records[r * len(pinned) + at] for r in range(repeats)]
            answers = [_answer(rec, pointwise) for rec in rounds]
            again[key] = answers
            ok = [a for a, rec in zip(answers, rounds, strict=True) if rec is not None and rec.status == "ok"]
            asked[i] += len(ok)
            flips[i] += sum(a != then for a in ok)
        field = "repeat_scores" if pointwise else "repeats"
        canaries.append(msgspec.structs.replace(c, **{field: again}))
    return msgspec.structs.replace(locked, canary=canaries, self_flip=_self_flip(flips, asked, repeats, seed))


def samples_self_flip(locked: LockedJudge, later: pa.Table, seed: int) -> LockedJudge:
    """``locked`` with its self-flip rate from the run's own later samples (``later``: the
    judge's records of sample 1 and up) of its canary presentations: each a fresh draw compared
    with the pinned sample 0, as a re-ask is (at most ``MAX_REPEATS`` a presentation, kept as
    its re-asks). Unchanged where the run holds none."""
    pointwise = locked.spec.protocol == "pointwise"
    ids = [c.item.item_id for c in locked.canary]
    rows = later.filter(pc.is_in(later["item_id"].cast(pa.string()), pa.array(ids, pa.string())))
    got: dict[str, dict[str, list[object]]] = {}
    for r in rows.sort_by("sample").to_pylist():
        if r["sample"] <= MAX_REPEATS:
            got.setdefault(r["item_id"], {}).setdefault(r["order"], []).append(r["score" if pointwise else "verdict"])
    flips, asked = np.zeros(len(ids), np.int64), np.zeros(len(ids), np.int64)
    canaries = []
    for i, c in enumerate(locked.canary):
        pinned = c.scores if pointwise else c.verdicts
        again = {key: answers for key, answers in got.get(c.item.item_id, {}).items() if key in pinned}
        asked[i] = sum(len(answers) for answers in again.values())
        flips[i] = sum(a != pinned[key] for key, answers in again.items() for a in answers)
        canaries.append(msgspec.structs.replace(c, **{"repeat_scores" if pointwise else "repeats": again}))
    if not asked.any():
        return locked
    repeats = max(len(answers) for c in got.values() for answers in c.values())
    flip = _self_flip(flips, asked, repeats, seed, "samples")
    return msgspec.structs.replace(locked, canary=canaries, self_flip=flip)


def _answer(record: object, pointwise: bool) -> object:
    ok = record is not None and record.status == "ok"  # type: ignore[attr-defined]
    return recheck.answer_of(record, pointwise) if ok else None


def _manifest_spec(manifest: Manifest, locked: LockedJudge) -> JudgeSpec:
    """The manifest's judge of ``locked``'s name, which must be the judge the run recorded."""
    spec = next((j for j in manifest.judges if j.name == locked.name), None)
    if spec is None:
        raise UsageError(f"--manifest has no judge {locked.name!r} (pin asks the run's judges, built from it)")
    changed = recheck.identity_before_calls(locked, spec)
    if changed:
        raise UsageError(f"--manifest's judge {locked.name!r} is not the one the run recorded: {'; '.join(changed)}")
    return spec


def pin(run_dir: Path, canary: int = 24, alpha: float = 0.05, labels: Path | None = None,
        tolerance: float = 0.05, manifest: Manifest | None = None, repeats: int = 2) -> LockFile:
    """The lock file of every judge of a finished run (composites make no calls: not pinned).
    With ``manifest`` (the judges are built from it, never from the run directory), each
    canary presentation is asked ``repeats`` more times: the judge's own flip rate."""
    check_numbers(canary, alpha, tolerance, repeats)
    info = RunDir(run_dir).info()
    recorded = info.manifest
    data = compact.load(Path(run_dir), _COLUMNS)
    if not data.num_rows:
        raise NotApplicable(f"{run_dir}: no successful records to pin")
    chosen = corpus.select(recorded)
    agreement = {}
    if labels is not None:
        from ..analyses import agree

        agreement = {j.judge: j.sets for j in agree.run(run_dir, labels).judges}
    locked = []
    for spec in recorded.judges:
        jid = info.judge_ids[spec.name]
        mine = data.filter(pc.equal(data["judge_id"].cast(pa.string()), jid))
        if not mine.num_rows or spec.calls == "escalations":
            continue  # nothing recorded, or only a hard subset: no canary to compare
        later = pc.fill_null(pc.greater(mine["sample"], 0), False)  # samples: k > 1: sample 0 is pinned
        mine, later = mine.filter(pc.invert(later)), mine.filter(later)
        ids = _canary_ids(mine, canary, recorded.seed)
        rows = mine.filter(pc.is_in(mine["item_id"].cast(pa.string()), pa.array(ids))).to_pylist()
        items = lookup(recorded, chosen, rows)
        verdicts: dict[str, dict[str, str]] = {}
        scores: dict[str, dict[str, float | None]] = {}
        for r in rows:
            verdicts.setdefault(r["item_id"], {})
            if spec.protocol == "pointwise":
                scores.setdefault(r["item_id"], {})[r["order"]] = r["score"]
            else:
                verdicts[r["item_id"]][r["order"]] = r["verdict"]
        canaries = [Canary(items[i], verdicts[i], scores.get(i, {})) for i in ids if i in items]
        locked.append(samples_self_flip(LockedJudge(
            spec.name, jid, spec, _template_name(spec),
            template_sha(spec), most_common(mine["served_model"].to_pylist()),
            most_common(mine["fingerprint"].to_pylist()), _labelled_accuracy(mine),
            agreement.get(spec.name, []), canaries), later, recorded.seed))
    if not locked:
        raise NotApplicable(f"{run_dir}: no judge with records to pin")
    if manifest is not None:
        specs = [_manifest_spec(manifest, j) for j in locked]  # every judge checked before any call
        locked = [j if j.self_flip is not None else measure_self_flip(j, s, repeats, recorded.seed)
                  for j, s in zip(locked, specs, strict=True)]
    return LockFile(__version__, timestamp(), str(Path(run_dir).resolve()), alpha, locked, tolerance,
                    seed=recorded.seed)

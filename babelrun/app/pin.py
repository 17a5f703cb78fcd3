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
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections import Counter
from pathlib import Path

import anyio
import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from .. import corpus, judges
from ..core.items import Item
from ..core.records import ORDERS
from ..core.version import __version__
from ..engine import CallLimits, JudgeState, limits, runner
from ..errors import NotApplicable, UsageError
from ..judges.protocol import Judging, TemplateError, template_of
from ..plan.lookup import lookup
from ..score import Interval, stats
from ..spec import JudgeSpec
from ..store import compact
from ..store.files import write_atomic
from ..store.rundir import read_run_info

LOCK_NAME = "judge.lock.json"
_COLUMNS = ["judge_id", "judge", "item_id", "kind", "lang", "ref_id", "perturbation", "severity", "order",
            "verdict", "served_model", "fingerprint", "score"]


class Canary(msgspec.Struct, frozen=True):
    item: Item
    verdicts: dict[str, str]  # order -> the verdict recorded when pinned (pairwise judges)
    # A pointwise judge: answer (reference, degraded) -> the score recorded (None: invalid).
    scores: dict[str, float | None] = {}


class LockedJudge(msgspec.Struct, frozen=True):
    name: str
    judge_id: str
    spec: JudgeSpec  # everything needed to ask it again
    template: str  # name@vN
    template_sha: str  # blake2b of the template's text (system + user)
    served_model: str | None
    fingerprint: str | None
    labelled_accuracy: Interval | None  # strict accuracy on the run's labelled pairs
    agreement: list = []  # agree's per-set figures against human labels (pin --labels)
    canary: list[Canary] = []


class CheckResult(msgspec.Struct, frozen=True):
    judge: str
    judge_id: str
    checked_at: str
    asked: int  # presentations
    answered: int
    failed: int
    verdict_flips: int
    right_then_only: int  # McNemar b
    right_now_only: int  # McNemar c
    mcnemar_p: float
    flip_p: float  # P(this many flips or more | the tolerated flip rate)
    served_model: str | None
    fingerprint: str | None
    identity_changed: list[str]  # "served_model: a -> b", …
    drift: bool
    ok: bool


class LockFile(msgspec.Struct):
    babelrun_version: str
    pinned_at: str
    run_dir: str
    alpha: float
    judges: list[LockedJudge]
    tolerance: float = 0.05  # the verdict-flip rate a re-ask may show without drift
    checks: list[CheckResult] = []
    # The run's seed: a judge that draws from it (the simulated one) must draw the same again.
    seed: int = 0


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _template_name(spec: JudgeSpec) -> str:
    t = template_of(spec)
    return f"{t.name}@v{t.version}"


def template_sha(spec: JudgeSpec) -> str:
    t = template_of(spec)
    texts = [t.system, t.user, *(s + "\x1f" + u for _, (s, u) in sorted(t.translations.items()))]
    return hashlib.blake2b("\x1e".join(texts).encode(), digest_size=12).hexdigest()


def _most_common(values: list) -> str | None:
    values = [v for v in values if v]
    return Counter(values).most_common(1)[0][0] if values else None


def _canary_ids(mine: pa.Table, n: int, seed: int) -> list[str]:
    """n items judged in both orders, in a seeded hash order (the same n for the same run)."""
    orders = Counter(mine["item_id"].to_pylist())
    both = [i for i, k in orders.items() if k == len(ORDERS)]
    return sorted(both, key=lambda i: hashlib.blake2b(f"{seed}\x1f{i}".encode(), digest_size=8).digest())[:n]


def _labelled_accuracy(mine: pa.Table) -> Interval | None:
    labelled = mine.filter(pc.equal(mine["kind"].cast(pa.string()), "labelled"))
    if not labelled.num_rows:
        return None
    right = pc.sum(pc.equal(labelled["verdict"].cast(pa.string()), "reference")).as_py() or 0
    lo, hi = stats.wilson(right, labelled.num_rows)
    return Interval(round(right / labelled.num_rows, 4), round(float(lo), 4), round(float(hi), 4), labelled.num_rows)


def pin(run_dir: Path, canary: int = 24, alpha: float = 0.05, labels: Path | None = None,
        tolerance: float = 0.05) -> LockFile:
    """The lock file of every judge of a finished run (composites make no calls: not pinned)."""
    info = read_run_info(run_dir)
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
            template_sha(spec), _most_common(mine["served_model"].to_pylist()),
            _most_common(mine["fingerprint"].to_pylist()), _labelled_accuracy(mine),
            agreement.get(spec.name, []), canaries))
    if not locked:
        raise NotApplicable(f"{run_dir}: no judge with records to pin")
    return LockFile(__version__, _now(), str(Path(run_dir).resolve()), alpha, locked, tolerance, seed=manifest.seed)


def write(lock: LockFile, path: Path) -> None:
    write_atomic(Path(path), msgspec.json.format(msgspec.json.encode(lock), indent=2) + b"\n")


def read(path: Path) -> LockFile:
    """The lock file; bad input (exit 2, never 1: in CI, 1 means the judge drifted)."""
    try:
        return msgspec.json.decode(Path(path).read_bytes(), type=LockFile)
    except (FileNotFoundError, IsADirectoryError):
        raise UsageError(f"{path}: no such lock file (write one with `babelrun pin RUN_DIR`)") from None
    except msgspec.DecodeError as e:
        raise UsageError(f"{path}: not a babelrun lock file ({e})") from None
    except RecursionError:  # the decoder's depth bound
        raise UsageError(f"{path}: not a babelrun lock file (nested too deeply)") from None


async def _ask(locked: LockedJudge, seed: int) -> list:
    spec = locked.spec
    judge = judges.build(spec, seed)
    how = Judging.of(spec)  # the request the audit sent: built-in or the user's template
    requests = [how.request(c.item, key) for c in locked.canary for key in how.keys]
    state = JudgeState(spec.name, locked.judge_id, len(requests), 0)
    calls = CallLimits.of(spec)
    run = runner(judge, limits.accounts([spec])[spec.name], state, calls)
    records = [None] * len(requests)
    queue = iter(enumerate(requests))

    async def worker() -> None:
        for i, request in queue:  # one shared iterator: each request taken once
            records[i] = await run.call(request)

    try:
        async with anyio.create_task_group() as tg:
            for _ in range(min(calls.workers, max(len(requests), 1))):
                tg.start_soon(worker)
    finally:
        await judge.aclose()
    return records


def _identity(locked: LockedJudge, served: str | None, fingerprint: str | None) -> list[str]:
    """What differs from the pinned identity: the provider's served model or fingerprint, the
    judge_id this babelrun computes, the prompt template's text."""
    changed = []
    for field, then, now in (("served_model", locked.served_model, served),
                             ("fingerprint", locked.fingerprint, fingerprint),
                             ("judge_id", locked.judge_id, judges.judge_id(locked.spec))):
        if then is not None and now is not None and then != now:
            changed.append(f"{field}: {then} -> {now}")
    if template_sha(locked.spec) != locked.template_sha:
        changed.append(f"prompt template {locked.template}: its text changed")
    return changed


def _pointwise_changes(locked: LockedJudge, records: list) -> tuple[int, int, int, int, int, int]:
    """A pointwise judge's canaries: (asked, answered, score changes, b, c): a changed score is
    a flip; an item is right when its reference scored above its degraded answer (McNemar)."""
    keys = Judging.of(locked.spec).keys
    asked = answered = flips = b = c = 0
    at = iter(records)
    for canary in locked.canary:
        now: dict[str, float | None] = {}
        for key in keys:
            record = next(at)
            if key not in canary.scores:
                continue
            asked += 1
            if record is not None and record.status == "ok":
                answered += 1
                now[key] = record.score
                flips += record.score != canary.scores[key]
        if len(now) == len(keys) == len(canary.scores):
            right = [s.get("reference") is not None and s.get("degraded") is not None
                     and s["reference"] > s["degraded"] for s in (canary.scores, now)]  # type: ignore[operator]
            b += right[0] and not right[1]
            c += right[1] and not right[0]
    return asked, answered, asked - answered, flips, b, c


def check_judge(locked: LockedJudge, records: list, alpha: float, tolerance: float) -> CheckResult:
    keys = Judging.of(locked.spec).keys  # the order _ask asked them in
    then = [c.verdicts.get(key) for c in locked.canary for key in keys]
    ok = [(t, r) for t, r in zip(then, records, strict=True) if t is not None and r is not None and r.status == "ok"]
    failed = len(then) - len(ok)
    b = sum(t == "reference" and r.verdict != "reference" for t, r in ok)
    c = sum(t != "reference" and r.verdict == "reference" for t, r in ok)
    flips = sum(t != r.verdict for t, r in ok)
    if locked.spec.protocol == "pointwise":
        asked, answered, failed, flips, b, c = _pointwise_changes(locked, records)
        then, ok = [None] * asked, [(None, r) for r in records if r is not None and r.status == "ok"][:answered]
    p = stats.mcnemar_exact(b, c)
    flip_p = stats.binomial_tail(flips, len(ok), tolerance)
    served = _most_common([r.served_model for _, r in ok])
    fingerprint = _most_common([r.fingerprint for _, r in ok])
    changed = _identity(locked, served, fingerprint)
    drift = p < alpha or flip_p < alpha
    return CheckResult(locked.name, locked.judge_id, _now(), len(then), len(ok), failed, flips, b, c,
                       round(p, 6), round(flip_p, 6), served, fingerprint, changed, drift,
                       not drift and not changed and failed == 0)


def check(lock: LockFile, only: str | None = None, alpha: float | None = None, seed: int | None = None,
          tolerance: float | None = None) -> list[CheckResult]:
    alpha = lock.alpha if alpha is None else alpha
    seed = lock.seed if seed is None else seed
    tolerance = lock.tolerance if tolerance is None else tolerance
    chosen = [j for j in lock.judges if only is None or j.name == only]
    if not chosen:
        raise UsageError(f"no judge named {only!r} in the lock file")
    for j in chosen:
        try:
            template_of(j.spec)
        except TemplateError as e:
            raise UsageError(f"judge {j.name!r}: {e}") from None
        if not j.canary:
            raise UsageError(f"judge {j.name!r} has no canary items in the lock file")

    async def go() -> list[CheckResult]:
        return [check_judge(j, await _ask(j, seed), alpha, tolerance) for j in chosen]

    return anyio.run(go)


def summary(results: list[CheckResult], alpha: float) -> str:
    lines = [f"{'judge':<20} {'asked':>5} {'failed':>6} {'flips':>5} {'flip p':>8} "
             f"{'b/c':>7} {'McNemar p':>10}  verdict"]
    for r in results:
        what = "ok"
        if r.drift:
            which = [f"{name} p={v:.3g}" for name, v in (("flips", r.flip_p), ("McNemar", r.mcnemar_p)) if v < alpha]
            what = f"DRIFT ({', '.join(which)} < {alpha:g})"
        if r.identity_changed:
            what = ("DRIFT; " if r.drift else "") + "IDENTITY CHANGED: " + "; ".join(r.identity_changed)
        if r.failed:
            what += f"; {r.failed} canary call(s) failed"
        lines.append(f"{r.judge[:20]:<20} {r.asked:>5} {r.failed:>6} {r.verdict_flips:>5} {r.flip_p:>8.3g} "
                     f"{f'{r.right_then_only}/{r.right_now_only}':>7} {r.mcnemar_p:>10.3g}  {what}")
    return "\n".join(lines)

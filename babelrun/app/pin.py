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
The lock's numbers are checked with the CLI's limits (``MAX_CANARY``); appends (and ``pin``
over an existing lock, which keeps its checks) run under a lock of the lock file's folder.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import anyio
import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from .. import corpus, judges
from ..core.items import Item
from ..core.records import ORDERS
from ..core.version import __version__
from ..engine import CallLimits, JudgeState, limits, runner
from ..errors import FatalJudgeError, NotApplicable, UsageError
from ..judges.protocol import Judging, template_of
from ..plan.lookup import lookup
from ..score import Interval, stats
from ..spec import JudgeSpec, Manifest
from ..spec.flat import flat_judge, split_judge
from ..spec.options import OptionsError, typed_options
from ..store import compact
from ..store.files import write_atomic
from ..store.rundir import read_run_info

LOCK_NAME = "judge.lock.json"
MAX_LOCK_BYTES = 64 << 20  # a lock file larger than this is refused before it is read
MAX_CANARY = 500  # canary items per judge at most (each asked in both orders): pin --canary and a lock alike
# The fields of a judge a lock records that decide where a key goes and what code runs: a
# lock naming other values than the manifest's is a changed identity, refused before any call.
# (The template is compared by its text's hash, ``template_sha``: its path may differ by machine.)
BOUND_FIELDS = ("backend", "model", "endpoint", "api_key_env", "headers", "headers_env", "organization",
                "project", "azure", "callable")
Alpha = Annotated[float, msgspec.Meta(gt=0, lt=1)]
Tolerance = Annotated[float, msgspec.Meta(ge=0, lt=1)]
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
    spec: JudgeSpec  # as pinned: a record to compare with, never used to build or ask the judge
    template: str  # name@vN
    template_sha: str  # blake2b of the template's text (system + user)
    served_model: str | None
    fingerprint: str | None
    labelled_accuracy: Interval | None  # strict accuracy on the run's labelled pairs
    agreement: list = []  # agree's per-set figures against human labels (pin --labels)
    canary: Annotated[list[Canary], msgspec.Meta(max_length=MAX_CANARY)] = []


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
    stopped: str | None = None  # why the canary calls stopped early (a 401), if they did


class LockFile(msgspec.Struct):
    babelrun_version: str
    pinned_at: str
    run_dir: str
    alpha: Alpha
    judges: Annotated[list[LockedJudge], msgspec.Meta(max_length=1000)]
    tolerance: Tolerance = 0.05  # the verdict-flip rate a re-ask may show without drift
    checks: list[CheckResult] = []
    # The run's seed: a judge that draws from it (the simulated one) must draw the same again.
    seed: Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)] = 0
    repinned: list[str] = []  # when an earlier pin of this file was replaced (pin --out over it), oldest first


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
    kind = mine["kind"].cast(pa.string())
    labelled = mine.filter(pc.is_in(kind, pa.array(["labelled", "labelled_tie"])))
    if not labelled.num_rows:
        return None
    # a tie-labelled pair (issue 27) is right when the judge says tie
    wanted = pc.if_else(pc.equal(labelled["kind"].cast(pa.string()), "labelled_tie"), "tie", "reference")
    right = pc.sum(pc.equal(labelled["verdict"].cast(pa.string()), wanted)).as_py() or 0
    lo, hi = stats.wilson(right, labelled.num_rows)
    return Interval(round(right / labelled.num_rows, 4), round(float(lo), 4), round(float(hi), 4), labelled.num_rows)


def pin(run_dir: Path, canary: int = 24, alpha: float = 0.05, labels: Path | None = None,
        tolerance: float = 0.05) -> LockFile:
    """The lock file of every judge of a finished run (composites make no calls: not pinned)."""
    check_numbers(canary, alpha, tolerance)
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


def check_numbers(canary: int | None, alpha: float | None, tolerance: float | None) -> None:
    """The CLI's limits (a lock file's numbers are held to the same ones when it is read)."""
    if canary is not None and not 1 <= canary <= MAX_CANARY:
        raise UsageError(f"--canary must be in [1, {MAX_CANARY}]")
    if alpha is not None and not 0 < alpha < 1:  # NaN fails both comparisons: refused too
        raise UsageError("--alpha must be in (0, 1)")
    if tolerance is not None and not 0 <= tolerance < 1:
        raise UsageError("--tolerance must be in [0, 1)")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on the lock file's folder while it is read and rewritten: two
    ``check``s (or a ``pin``) at once each keep what the other appended. The folder, not the
    file: the file is replaced by each write, so a lock on it would guard an old inode."""
    fd = os.open(Path(path).parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _encode(lock: LockFile) -> bytes:
    raw = msgspec.to_builtins(lock)
    for entry, judge in zip(raw["judges"], lock.judges, strict=True):  # each spec flat, as the manifest has it
        entry["spec"] = flat_judge(judge.spec)
    return msgspec.json.format(msgspec.json.encode(raw), indent=2) + b"\n"


def _decode(data: bytes) -> LockFile:
    """A lock file; each judge's spec flat (a lock of any version: another backend's option at
    its old default, as every judge listed them once, is no error)."""
    raw = msgspec.json.decode(data)
    entries = raw.get("judges") if isinstance(raw, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("spec"), dict)
                                                for e in entries):
        return msgspec.convert(raw, LockFile)  # msgspec names what is missing or wrong
    own = []
    for entry in entries:
        entry["spec"], extras = split_judge(entry["spec"])
        own.append(extras)
    lock = msgspec.convert(raw, LockFile)
    try:
        lock.judges = [msgspec.structs.replace(j, spec=msgspec.structs.replace(
            j.spec, options=typed_options(j.spec.backend, extras, judges.options_type, legacy=True)))
            for j, extras in zip(lock.judges, own, strict=True)]
    except (KeyError, OptionsError) as e:
        raise msgspec.ValidationError(f"a judge's options: {e}") from None
    return lock


def write(lock: LockFile, path: Path) -> None:
    write_atomic(Path(path), _encode(lock))


def write_new(lock: LockFile, path: Path) -> LockFile:
    """``pin``'s write: over an existing lock file, its checks are kept (the changelog goes
    on, each check naming the judge_id it checked) and the earlier pin's date recorded; a
    file there that is no lock file is refused, never overwritten."""
    path = Path(path)
    with _locked(path):
        if path.exists() or path.is_symlink():
            old = read(path)
            lock = msgspec.structs.replace(lock, checks=[*old.checks, *lock.checks],
                                           repinned=[*old.repinned, old.pinned_at])
        write(lock, path)
    return lock


def append_checks(path: Path, results: list[CheckResult]) -> LockFile:
    """Append ``results`` to the lock file as it is now (re-read under the folder's lock)."""
    with _locked(Path(path)):
        lock = read(path)
        lock.checks = [*lock.checks, *results]
        write(lock, path)
    return lock


def read(path: Path) -> LockFile:
    """The lock file; bad input (exit 2, never 1: in CI, 1 means the judge drifted). Its
    numbers are held to the CLI's limits by its types (alpha, tolerance, canaries)."""
    try:
        if Path(path).stat().st_size > MAX_LOCK_BYTES:
            raise UsageError(f"{path}: not a babelrun lock file (larger than {MAX_LOCK_BYTES >> 20} MiB)")
        return _decode(Path(path).read_bytes())
    except (FileNotFoundError, IsADirectoryError):
        raise UsageError(f"{path}: no such lock file (write one with `babelrun pin RUN_DIR`)") from None
    except msgspec.DecodeError as e:
        raise UsageError(f"{path}: not a babelrun lock file ({e})") from None
    except RecursionError:  # the decoder's depth bound
        raise UsageError(f"{path}: not a babelrun lock file (nested too deeply)") from None


async def _ask(locked: LockedJudge, spec: JudgeSpec, seed: int) -> tuple[list, str | None]:
    """The canary requests asked of the judge ``spec`` (the manifest's, never the lock's);
    the records, and why the calls stopped early (a 401: every later call would fail alike)."""
    judge = judges.build(spec, seed)
    how = Judging.of(spec)  # the request the audit sent: built-in or the user's template
    requests = [how.request(c.item, key) for c in locked.canary for key in how.keys]
    state = JudgeState(spec.name, locked.judge_id, len(requests), 0)
    calls = CallLimits.of(spec)
    run = runner(judge, limits.accounts([spec])[spec.name], state, calls)
    records = [None] * len(requests)
    queue = iter(enumerate(requests))
    stopped: list[str] = []

    async def worker(scope: anyio.CancelScope) -> None:
        for i, request in queue:  # one shared iterator: each request taken once
            try:
                records[i] = await run.call(request)
            except FatalJudgeError as e:  # no call of this judge can pass: stop them all, in one line
                stopped.append(" ".join(str(e).split())[:200])
                scope.cancel()
                return

    try:
        async with anyio.create_task_group() as tg:
            for _ in range(min(calls.workers, max(len(requests), 1))):
                tg.start_soon(worker, tg.cancel_scope)
    finally:
        await judge.aclose()
    return records, (stopped[0] if stopped else None)


def _identity(locked: LockedJudge, spec: JudgeSpec, served: str | None, fingerprint: str | None) -> list[str]:
    """What differs from the pinned identity: the provider's served model or fingerprint, the
    judge_id this babelrun computes for the manifest's judge, the prompt template's text."""
    changed = []
    for field, then, now in (("served_model", locked.served_model, served),
                             ("fingerprint", locked.fingerprint, fingerprint),
                             ("judge_id", locked.judge_id, judges.judge_id(spec))):
        if then is not None and now is not None and then != now:
            changed.append(f"{field}: {then} -> {now}")
    if template_sha(spec) != locked.template_sha:
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


def _short(value: object) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= 60 else text[:57] + "..."


def identity_before_calls(locked: LockedJudge, spec: JudgeSpec) -> list[str]:
    """Before any call: what the lock records of the judge that the manifest's judge is not
    (judge_id, the template's text, ``BOUND_FIELDS``). Non-empty: no call is made for it."""
    changed = _identity(locked, spec, None, None)
    then_fields, now_fields = flat_judge(locked.spec), flat_judge(spec)
    for field in BOUND_FIELDS:
        then, now = then_fields.get(field), now_fields.get(field)
        if then != now:
            changed.append(f"{field}: the lock has {_short(then)}, the manifest {_short(now)}")
    return changed


def check_judge(locked: LockedJudge, records: list, alpha: float, tolerance: float,
                spec: JudgeSpec | None = None, stopped: str | None = None) -> CheckResult:
    spec = locked.spec if spec is None else spec
    keys = Judging.of(spec).keys  # the order _ask asked them in
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
    changed = _identity(locked, spec, served, fingerprint)
    drift = p < alpha or flip_p < alpha
    return CheckResult(locked.name, locked.judge_id, _now(), len(then), len(ok), failed, flips, b, c,
                       round(p, 6), round(flip_p, 6), served, fingerprint, changed, drift,
                       not drift and not changed and failed == 0, stopped)


def _unasked(locked: LockedJudge, changed: list[str]) -> CheckResult:
    """A judge refused before any call (its identity changed): nothing asked."""
    return CheckResult(locked.name, locked.judge_id, _now(), 0, 0, 0, 0, 0, 0, 1.0, 1.0, None, None,
                       changed, False, False)


def check(lock: LockFile, manifest: Manifest, only: str | None = None, alpha: float | None = None,
          seed: int | None = None, tolerance: float | None = None) -> list[CheckResult]:
    """Re-ask the canaries of the lock's judges, each built from ``manifest``'s judge of the
    same name (a judge the manifest lacks is bad input); a judge whose identity differs from
    the lock's is reported changed and not asked."""
    alpha = lock.alpha if alpha is None else alpha
    seed = lock.seed if seed is None else seed
    tolerance = lock.tolerance if tolerance is None else tolerance
    check_numbers(None, alpha, tolerance)
    chosen = [j for j in lock.judges if only is None or j.name == only]
    if not chosen:
        raise UsageError(f"no judge named {only!r} in the lock file")
    by_name = {j.name: j for j in manifest.judges}
    specs: dict[str, JudgeSpec] = {}
    for j in chosen:
        if j.name not in by_name:
            raise UsageError(f"the lock pins judge {j.name!r}, which the manifest does not have "
                             "(check builds each judge from the manifest, never from the lock)")
        if not j.canary:
            raise UsageError(f"judge {j.name!r} has no canary items in the lock file")
        if j.spec.backend not in judges.BACKENDS:  # a lock naming no real judge is a bad lock file
            raise UsageError(f"judge {j.name!r} of the lock file names an unknown backend {_short(j.spec.backend)}")
        specs[j.name] = by_name[j.name]
    changed = {j.name: identity_before_calls(j, specs[j.name]) for j in chosen}

    async def go() -> list[CheckResult]:
        results = []
        for j in chosen:
            if changed[j.name]:
                results.append(_unasked(j, changed[j.name]))
                continue
            records, stopped = await _ask(j, specs[j.name], seed)
            results.append(check_judge(j, records, alpha, tolerance, specs[j.name], stopped))
        return results

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
        if not r.asked and r.identity_changed:
            what += " (not asked: no call made)"
        if r.failed:
            what += f"; {r.failed} canary call(s) failed"
        if r.stopped:
            what += f"; stopped: {r.stopped}"
        lines.append(f"{r.judge[:20]:<20} {r.asked:>5} {r.failed:>6} {r.verdict_flips:>5} {r.flip_p:>8.3g} "
                     f"{f'{r.right_then_only}/{r.right_now_only}':>7} {r.mcnemar_p:>10.3g}  {what}")
    return "\n".join(lines)

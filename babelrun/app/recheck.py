"""``babelrun check``: a lock file's canaries re-asked of the manifest's judges, and compared.

Per judge: McNemar on correctness (did accuracy move?), the verdict flips against the judge's
self-flip rate the pin measured (``flip_test``; a lock without one: the tolerated flip rate),
each at alpha / 2 (did the judge change its mind more than its own noise explains?), and the
identity (served model, fingerprint, judge_id, the prompt's text) against the pinned one. A
judge is built from the user's manifest, never from the lock; one whose identity differs
(``identity_before_calls``) is reported changed before any call, and none is made for it.
"""

from __future__ import annotations

import anyio

from .. import judges
from ..engine import CallLimits, JudgeState, limits, runner
from ..errors import FatalJudgeError, UsageError
from ..judges.identity import ROUTING_FIELDS
from ..judges.protocol import Judging
from ..score import stats
from ..spec import JudgeSpec, Manifest
from ..spec.flat import flat_judge
from .lockfile import CheckResult, LockedJudge, LockFile, check_numbers, most_common, template_sha, timestamp

# The fields of a judge a lock records that decide where a key goes and what code runs, the
# ones judge_id holds for them (``judges.identity.ROUTING_FIELDS``): a lock naming other values
# than the manifest's is a changed identity, refused before any call, even where its judge_id
# was left as the manifest's. (The template is compared by its text's hash, ``template_sha``:
# its path may differ by machine; a code judge's code by judge_id, which hashes it.)
BOUND_FIELDS = ROUTING_FIELDS


async def _ask(locked: LockedJudge, spec: JudgeSpec, seed: int, repeats: int = 1) -> tuple[list, str | None]:
    """The canary requests asked of the judge ``spec`` (the manifest's, never the lock's),
    each presentation ``repeats`` times (``pin``: the judge's own noise), in rounds: round r's
    records are ``records[r * n : (r + 1) * n]`` for n presentations. The records, and why the
    calls stopped early (a 401: every later call would fail alike)."""
    judge = judges.build(spec, seed)
    how = Judging.of(spec)  # the request the audit sent: built-in or the user's template
    requests = [how.request(c.item, key) for c in locked.canary for key in how.keys] * repeats
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


def ask(locked: LockedJudge, spec: JudgeSpec, seed: int, repeats: int = 1) -> tuple[list, str | None]:
    return anyio.run(_ask, locked, spec, seed, repeats)


def pinned_answers(locked: LockedJudge, spec: JudgeSpec) -> list[tuple[bool, object]]:
    """Per presentation, in ``_ask``'s order: whether the lock pins an answer for it and that
    answer (a pairwise judge's verdict by order, a pointwise judge's score by answer)."""
    keys = Judging.of(spec).keys
    if locked.spec.protocol == "pointwise":
        return [(key in c.scores, c.scores.get(key)) for c in locked.canary for key in keys]
    return [(c.verdicts.get(key) is not None, c.verdicts.get(key)) for c in locked.canary for key in keys]


def answer_of(record: object, pointwise: bool) -> object:
    return record.score if pointwise else record.verdict  # type: ignore[attr-defined]


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
    test, expected, flip_p = flip_test(locked, flips, len(ok), tolerance)
    served = most_common([r.served_model for _, r in ok])
    fingerprint = most_common([r.fingerprint for _, r in ok])
    changed = _identity(locked, spec, served, fingerprint)
    drift = p < alpha / 2 or flip_p < alpha / 2  # two tests, each at alpha / 2: the check's level is alpha
    return CheckResult(locked.name, locked.judge_id, timestamp(), len(then), len(ok), failed, flips, b, c,
                       round(p, 6), round(flip_p, 6), served, fingerprint, changed, drift,
                       not drift and not changed and failed == 0, stopped, test, expected)


def flip_test(locked: LockedJudge, flips: int, answered: int, tolerance: float) -> tuple[str, float, float]:
    """Which test the check's flips get, the rate they are held to, and its one-sided p.

    With the self-flip rate ``pin`` measured (``flips0`` of ``n0`` re-asks differing from the
    pinned answer): one-sided Fisher exact test of ``flips`` of ``answered`` against it. Under
    no drift a check's answer and a pin's re-ask are draws of the same judge compared with the
    same pinned draw, so both counts have the same rate, and the test conditions on their sum:
    the baseline's own sampling error is allowed for. A lock without one (an earlier version,
    or pinned without ``--manifest``): exact binomial against the tolerated rate."""
    base = locked.self_flip
    if base is not None and base.asked:
        return "fisher", base.rate, stats.fisher_greater(flips, answered, base.flips, base.asked)
    return "tolerance", tolerance, stats.binomial_tail(flips, answered, tolerance)


def _unasked(locked: LockedJudge, changed: list[str]) -> CheckResult:
    """A judge refused before any call (its identity changed): nothing asked."""
    test = "fisher" if locked.self_flip is not None and locked.self_flip.asked else "tolerance"
    return CheckResult(locked.name, locked.judge_id, timestamp(), 0, 0, 0, 0, 0, 0, 1.0, 1.0, None, None,
                       changed, False, False, flip_test=test)


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

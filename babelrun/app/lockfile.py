"""The lock file ``babelrun pin`` writes and ``babelrun check`` appends to: its format and its
reads and writes. A lock file is data (it is committed and shared; docs/trust.md): its numbers
are held to the CLI's limits by its types (``MAX_CANARY``), a file too large or of another
shape is bad input (exit 2), and appends (and ``pin`` over an existing lock, which keeps its
checks) run under a lock of the lock file's folder."""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Literal

import msgspec

from .. import judges
from ..core.items import Item
from ..errors import UsageError
from ..judges.protocol import template_of
from ..score import Interval
from ..spec import JudgeSpec
from ..spec.flat import flat_judge, split_judge
from ..spec.options import OptionsError, typed_options
from ..store.files import write_atomic

LOCK_NAME = "judge.lock.json"
MAX_LOCK_BYTES = 64 << 20  # a lock file larger than this is refused before it is read
MAX_CANARY = 500  # canary items per judge at most (each asked in both orders): pin --canary and a lock alike
MAX_REPEATS = 10  # pin --repeats at most: re-asks of each canary presentation when pinning
Alpha = Annotated[float, msgspec.Meta(gt=0, lt=1)]
Tolerance = Annotated[float, msgspec.Meta(ge=0, lt=1)]


class Canary(msgspec.Struct, frozen=True):
    item: Item
    verdicts: dict[str, str]  # order -> the verdict recorded when pinned (pairwise judges)
    # A pointwise judge: answer (reference, degraded) -> the score recorded (None: invalid).
    scores: dict[str, float | None] = {}
    # The re-asks ``pin`` made of each presentation (order or answer -> their verdicts or
    # scores, None where a call failed): compared with the pinned one, the judge's own noise.
    repeats: dict[str, Annotated[list[str | None], msgspec.Meta(max_length=MAX_REPEATS)]] = {}
    repeat_scores: dict[str, Annotated[list[float | None], msgspec.Meta(max_length=MAX_REPEATS)]] = {}


class SelfFlip(msgspec.Struct, frozen=True):
    """The judge's own flip rate, measured by ``pin``: of the answered re-asks of the canary
    presentations, the share whose verdict (a pointwise judge: score) differs from the pinned
    one, with a 95 % interval from a bootstrap over canary items (an item's re-asks share its
    pinned answer: they are resampled together). It is the rate an unchanged judge's ``check``
    shows: a check's answer and a re-ask are both fresh draws compared with the same pinned
    draw (docs/analyses.md, *Pinning a judge*)."""

    repeats: Annotated[int, msgspec.Meta(ge=1, le=MAX_REPEATS)]  # asks per presentation
    asked: Annotated[int, msgspec.Meta(ge=0)]  # answered re-asks
    flips: Annotated[int, msgspec.Meta(ge=0)]  # of them, differing from the pinned answer
    rate: Annotated[float, msgspec.Meta(ge=0, le=1)]
    lo: Annotated[float, msgspec.Meta(ge=0, le=1)]
    hi: Annotated[float, msgspec.Meta(ge=0, le=1)]
    # Where the draws came from: "re-asks" pin made, or the "samples" the run asked (samples: k
    # > 1: sample 0 pinned, the later ones compared with it).
    source: Literal["re-asks", "samples"] = "re-asks"

    def __post_init__(self) -> None:
        if self.flips > self.asked:  # a lock's counts are data: held to what a pin can write
            raise ValueError("self_flip: more flips than re-asks")


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
    self_flip: SelfFlip | None = None  # absent in locks of earlier versions, or pinned without --manifest


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
    flip_p: float  # one-sided p of this many flips or more (the test ``flip_test`` names)
    served_model: str | None
    fingerprint: str | None
    identity_changed: list[str]  # "served_model: a -> b", …
    drift: bool
    ok: bool
    stopped: str | None = None  # why the canary calls stopped early (a 401), if they did
    # Which test flip_p is of: "fisher" (against the pinned self-flip rate), "tolerance" (a
    # lock without one: exact binomial against the tolerated rate); the rate it was held to.
    flip_test: str = "tolerance"
    expected_flip_rate: float | None = None


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


def template_sha(spec: JudgeSpec) -> str:
    t = template_of(spec)
    texts = [t.system, t.user, *(s + "\x1f" + u for _, (s, u) in sorted(t.translations.items()))]
    return hashlib.blake2b("\x1e".join(texts).encode(), digest_size=12).hexdigest()


def most_common(values: list) -> str | None:
    values = [v for v in values if v]
    return Counter(values).most_common(1)[0][0] if values else None


def timestamp() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def check_numbers(canary: int | None, alpha: float | None, tolerance: float | None,
                  repeats: int | None = None) -> None:
    """The CLI's limits (a lock file's numbers are held to the same ones when it is read)."""
    if repeats is not None and not 2 <= repeats <= MAX_REPEATS:
        raise UsageError(f"--repeats must be in [2, {MAX_REPEATS}]")
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
    except KeyError as e:  # a backend no registry or plugin knows: the lock names no real judge
        raise msgspec.ValidationError(f"unknown backend {str(e.args[0])[:60]!r}") from None
    except OptionsError as e:
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

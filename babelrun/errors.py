"""Every error babelrun raises on purpose, in one tree::

    BabelrunError
    ├── UserError            something the user can fix; the CLI prints one line, exit_code
    │   ├── ManifestError    a manifest field is wrong (exit 2; ``path`` names the field)
    │   ├── UsageError       a command-line argument is wrong (exit 2)
    │   ├── NotApplicable    the input holds nothing the command can work on (exit 2)
    │   └── RunDirBusy       another process holds the run directory's lock (exit 1)
    └── JudgeError           one call to a judge failed; ``kind`` is an ErrorKind value
        ├── RetryableError   worth trying again (429, 5xx, timeout, reset, garbled body)
        ├── RejectedError    this request refused (400, 413, 422): others may pass
        └── FatalJudgeError  no request of this judge can pass (401, 403, 404): stop it

Judge errors cross process boundaries (Ray workers), so each pickles with its fields.
"""

from __future__ import annotations

from enum import StrEnum


class BabelrunError(Exception):
    """The root of babelrun's own errors."""


class UserError(BabelrunError):
    """Something the user can fix: a bad manifest, a missing file, a rejected key.

    ``exit_code`` follows the CLI's convention: 2 for bad input (nothing was written),
    1 for a run that could not finish (what it wrote is resumable).
    """

    exit_code = 1


class ManifestError(UserError):
    """A manifest field is wrong. ``path`` names it the way a user would write it."""

    exit_code = 2

    def __init__(self, path: str, problem: str, source: str | None = None):
        self.path = path
        self.problem = problem
        self.source = source
        where = f"{source}: " if source else ""
        field = f"{path}: " if path else ""
        super().__init__(f"{where}{field}{problem}")

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return type(self), (self.path, self.problem, self.source)


class UsageError(UserError):
    """A command-line argument is wrong (nothing was run or written)."""

    exit_code = 2


class NotApplicable(UserError):
    """The input is readable but this command finds nothing to work on in it: a folder that is
    no run directory, one judge where judges are compared, no label matching a judged pair.
    Bad input, as the CLI's exit codes count it: nothing was written."""

    exit_code = 2


class RunDirBusy(UserError):
    """The run directory (or one shard of it) is locked by a live process."""


class ErrorKind(StrEnum):
    """The one vocabulary of ``JudgeError.kind``, as recorded in a log record's
    ``error_kind``. Every kind the package raises or records is a member (a test reads the
    source for them); a third-party backend may use its own words beside these."""

    # retried: the next attempt (or the next audit) may pass
    RATE_LIMITED = "rate_limited"  # 429
    SERVER = "server_error"  # 5xx
    OVERLOADED = "overloaded"  # Anthropic's 529
    TIMEOUT = "timeout"  # no reply in time (408, or the client's timeout)
    CONFLICT = "conflict"  # 409
    TOO_EARLY = "too_early"  # 425
    CONNECTION = "connection"  # refused, reset, DNS
    BAD_RESPONSE = "bad_response"  # a 2xx whose body is not the documented shape
    OVERSIZE = "oversize"  # a reply past the size cap
    REPLICA_DIED = "replica_died"  # a Ray replica of a local model ended
    # this request refused; others may pass
    REJECTED = "rejected"  # 400, 413, 422, …
    CALLABLE_ERROR = "callable_error"  # a python judge raised
    RULE_ERROR = "rule_error"  # a rule judge's function raised
    BATCH = "batch_error"  # a key of a provider batch without a result
    # read, not failed: the reply is kept and recorded ``invalid`` (the key is done)
    PATTERN_TIMEOUT = "pattern_timeout"  # a user regex ran past its time on the reply (judges.safe_regex)
    # not judged (never guessed): the key stays undone
    NOT_IN_REPLAY = "not_in_replay"  # a replay judge's file has no verdict for the key
    # fatal: no request of this judge can pass
    UNAUTHORIZED = "unauthorized"  # 401
    FORBIDDEN = "forbidden"  # 403
    NOT_FOUND = "not_found"  # 404, or an unknown model or endpoint
    REDIRECT = "redirect"  # 3xx: never followed with credentials
    SPEND_LIMIT = "spend_limit"  # a provider's spend limit reached
    BILLING = "billing"  # Anthropic's 402: the account cannot pay
    NOT_INSTALLED = "not_installed"  # a local backend's runtime or model package missing


class JudgeError(BabelrunError):
    """One call to a judge failed. ``kind`` names how (an ``ErrorKind`` value; a plugin may
    use its own word); the message is for people and is masked of keys by the backend."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return type(self), (self.kind, str(self))


class RetryableError(JudgeError):
    """A failure worth trying again: 429, 5xx, timeout, dropped connection, garbled body.
    ``retry_after``: the seconds the provider asked for, when it said."""

    def __init__(self, kind: str, message: str, retry_after: float | None = None):
        super().__init__(kind, message)
        self.retry_after = retry_after

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return type(self), (self.kind, str(self), self.retry_after)


class RejectedError(JudgeError):
    """The provider refused this one request (400, 413, 422, …): repeating it cannot help, but
    other requests may succeed. Recorded as an error; many in a row trip the judge's breaker."""


class FatalJudgeError(JudgeError):
    """A failure no request of this judge can get past (bad key, no access, unknown model or
    endpoint): stop the judge at once."""

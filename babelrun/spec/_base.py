"""The manifest types' shared parts: the strict base struct, bounded numbers, and the limits
every size and wait in a manifest is held to (re-exported by ``babelrun.spec``)."""

from __future__ import annotations

from typing import Annotated

import msgspec

__all__ = [
    'Probability', 'Severity', 'PositiveInt', 'MAX_CONCURRENCY', 'MAX_RETRIES', 'MAX_TIMEOUT_S', 'MAX_POLL_S',
    'MAX_RPM', 'MAX_TPM', 'MAX_BOOTSTRAP', 'MAX_SEGMENT_MB', 'MAX_FSYNC_INTERVAL_S', 'MAX_BATCH_SIZE',
    'MAX_WORKERS', 'DEFAULT_SEVERITIES', '_Spec',
]

Probability = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
Severity = Annotated[float, msgspec.Meta(gt=0.0, le=1.0)]
PositiveInt = Annotated[int, msgspec.Meta(ge=1, le=1 << 31)]  # a count that fits any array index

# Bounds on every size and wait a manifest sets, so that no value can exhaust memory or wait
# forever (docs/operations.md, "Limits"). Each is far above any sensible setting.
MAX_CONCURRENCY = 4096  # calls in flight per judge
MAX_RETRIES = 100
MAX_TIMEOUT_S = 3600.0  # one call
MAX_POLL_S = 3600.0  # provider batch polling interval
MAX_RPM = 1e7  # requests per minute; the least is 1 (a call a minute)
MAX_TPM = 1e10
MAX_BOOTSTRAP = 100_000  # resamples (each costs one pass over the records)
MAX_SEGMENT_MB = 4096.0
MAX_FSYNC_INTERVAL_S = 3600.0
MAX_BATCH_SIZE = 4096
MAX_WORKERS = 4096

DEFAULT_SEVERITIES = (0.3, 0.6)


class _Spec(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """Base for every manifest section: strict and immutable."""

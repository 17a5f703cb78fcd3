"""What can go wrong at the fake server, and how long it takes: the random fault kinds (in
the order they share one uniform draw), the latency distributions, what the random knobs
decided for one request (``Fate``), and the hostile behaviours of a broken or malicious
provider."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

LATENCY_DISTRIBUTIONS = ("fixed", "uniform", "lognormal")
# The random fault kinds, in the order they take their share of one uniform draw
# (``FakeJudgeServer._draw``).
FAULT_KINDS = ("429", "5xx", "timeout", "drop", "malformed")
STATUSES_5XX = (500, 502, 503)  # a random 5xx fault: one of these, equally likely


def sample_latency(rng: random.Random, dist: str, mean_s: float, jitter_s: float = 0.0,
                   sigma: float = 0.5) -> float:
    """One reply latency in seconds; every distribution has mean ``mean_s``.

    ``fixed``: always ``mean_s``. ``uniform``: uniform on ``mean_s ± jitter_s``.
    ``lognormal``: lognormal with shape ``sigma`` (the standard deviation of its logarithm),
    scaled so that its mean, not its median, is ``mean_s``: a long right tail, as real APIs have.
    """
    if dist == "fixed" or mean_s <= 0:
        return mean_s
    if dist == "uniform":
        return rng.uniform(mean_s - jitter_s, mean_s + jitter_s)
    if dist == "lognormal":
        # E[exp(N(mu, s^2))] = exp(mu + s^2 / 2): choose mu so that this is mean_s.
        return rng.lognormvariate(math.log(mean_s) - sigma * sigma / 2, sigma)
    raise ValueError(f"unknown latency distribution {dist!r}; one of {LATENCY_DISTRIBUTIONS}")


@dataclass(frozen=True)
class Fate:
    """What the random knobs decided for one request, drawn when it arrives."""

    fault: str | None  # one of FAULT_KINDS, or None
    status_5xx: int
    truncate: bool  # a malformed body: cut JSON (True) or JSON without "choices" (False)
    latency_s: float


# Hostile behaviours (``hostile=``): what a broken or malicious provider (or a proxy in front
# of one) can answer. Each applies to every request that passes the key check.
HOSTILE = {
    "echo_key_4xx": "``hostile_status`` (400) whose JSON error message quotes the request's key "
                    "past the 200th character",
    "echo_key_5xx": "503 whose JSON error message quotes the key (then retried)",
    "echo_headers": "``hostile_status`` (400) with a text body listing every request header",
    "redirect": "307 to ``redirect_to`` (another server: it must never see the key)",
    "endless": "200 whose chunked body never ends",
    "huge": "200 whose verdict text is 10 MB",
    "retry_after_inf": "429 with Retry-After: inf",
    "retry_after_huge": "429 with Retry-After: 1e9 and x-ratelimit-reset-requests: 99999h",
    "escapes": "``hostile_status`` (401) whose message and served model carry terminal escapes, "
               "an OSC title, U+202E and a carriage return",
}
ESCAPES = "\x1b[2J\x1b]0;pwned\x07\u202e\rX"

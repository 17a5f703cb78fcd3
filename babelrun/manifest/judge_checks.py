"""The checks of one judge, through its backend's registration: options that apply, the
protocol, the backend's own ``check``, an HTTP judge's endpoint and key, and its price file."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from .. import judges
from ..core import bounds
from ..errors import ManifestError
from ..judges.options import batch_of
from ..judges.protocol import Judging, TemplateError
from ..spec import (
    JudgeSpec,
    Price,
)
from .decode import _AT, _did_you_mean


def _host(url: str) -> str | None:
    from urllib.parse import urlsplit

    try:
        return urlsplit(url).hostname
    except ValueError:
        return None




def _check_judge(judge: JudgeSpec, where: str, environ) -> Judging:
    """The judge's checks, through its backend's registration; returns its protocol."""
    if not judges.known(judge.backend):
        raise ManifestError(f"{where}.backend", f"unknown backend {judge.backend!r}"
                                                f"{_did_you_mean(judge.backend, judges.BACKENDS)} "
                                                f"(known: {', '.join(judges.names())})")
    caps = judges.capabilities(judge.backend)
    for field in ("endpoint", "api_key_env"):  # an HTTP API's (``Capabilities.remote``)
        if getattr(judge, field) is not None and not caps.remote:
            http = ", ".join(_having("remote"))
            raise ManifestError(f"{where}.{field}", f"does not apply to the {judge.backend} backend "
                                                    f"(it applies to the HTTP backends: {http})")
    if batch_of(judge) and not caps.batch_api:
        raise ManifestError(f"{where}.batch", f"the {judge.backend} backend has no batch API "
                                              f"(batch: {', '.join(_having('batch_api'))})")
    try:
        protocol = Judging.of(judge)
    except TemplateError as e:
        raise ManifestError(f"{where}.{e.field}", f"judge {judge.name!r}: {e}") from None
    _check_protocol(judge, where)
    _warn_patterns(judge, where)
    wrong = judges.check(judge, environ)  # the backend's own checks (its module's ``check``)
    if wrong is not None:
        raise ManifestError(f"{where}.{wrong[0]}", wrong[1])
    _check_model(judge, where, environ, caps)
    if judge.soft and not caps.soft:
        raise ManifestError(f"{where}.soft", f"the {judge.backend} backend gives no token log-probabilities "
                                             f"(soft verdicts: {', '.join(_having('soft'))})")
    if batch_of(judge) and judge.soft:
        raise ManifestError(f"{where}.batch", "batch and soft cannot be combined")
    return protocol


def _warn_patterns(judge: JudgeSpec, where: str) -> None:
    """One warning line per user pattern that nests quantifiers (``(a+)+``): it may backtrack
    for ever on some reply; the engine cuts each search off (``judges.safe_regex``)."""
    import sys

    from ..judges import safe_regex

    rule = getattr(judges.options_of(judge), "rule", None)  # a rule judge's pattern (judges/rule.py)
    patterns = {f"{where}.verdict.pattern": judge.verdict.pattern if judge.verdict is not None else None,
                f"{where}.rule.pattern": getattr(rule, "pattern", None)}
    for field, pattern in patterns.items():
        if pattern and safe_regex.risky(pattern):
            print(f"babelrun: warning: {field}: {pattern[:60]!r} nests quantifiers over the same text: it can "
                  f"backtrack exponentially; a search past {safe_regex.TIMEOUT_S:g} s reads invalid "
                  "(pattern_timeout)", file=sys.stderr)


def _check_protocol(judge: JudgeSpec, where: str) -> None:
    if judge.protocol == "pointwise" and judge.soft:
        raise ManifestError(f"{where}.soft", f"judge {judge.name!r}: soft verdicts are slot probabilities: "
                                             "pairwise only")
    if judge.verdict is not None and judge.soft and (judge.verdict.pattern or judge.verdict.scores is not None):
        raise ManifestError(f"{where}.verdict", f"judge {judge.name!r}: a soft judge reads probabilities, "
                                                "not a verdict pattern (its own label tokens: "
                                                "verdict: {labels: {m: A, M: B}}, no pattern)")


def _having(capability: str) -> list[str]:
    return [name for name, b in judges.BACKENDS.items() if getattr(b.capabilities, capability)]


def _check_model(judge: JudgeSpec, where: str, environ, caps: judges.Capabilities) -> None:
    """A remote judge's endpoint and key variables (every HTTP backend alike)."""
    if not caps.remote:
        return
    if not judge.model and caps.model_required:
        raise ManifestError(f"{where}.model", f"the {judge.backend} backend needs a model name")
    if judge.endpoint is not None and not re.match(r"^https?://", judge.endpoint):
        raise ManifestError(f"{where}.endpoint", "must start with http:// or https://")
    if judge.endpoint is not None and not _host(judge.endpoint):
        raise ManifestError(f"{where}.endpoint", f"{judge.endpoint!r} names no host")
    from ..judges.presets import key_env

    variable = key_env(judge.backend, judge.api_key_env, judge.endpoint)
    if variable and variable not in environ:
        raise ManifestError(f"{where}.api_key_env", f"environment variable {variable} is not set")


MAX_PRICE_FILE_BYTES = 1 << 20  # a price table: 1 MiB


def price_from_file(judge: JudgeSpec, where: str = "price_file") -> Price:
    """The judge's entry in its ``price_file``: YAML (or JSON, a subset) mapping model names to
    prices, ``{model: {input_per_mtok: …, output_per_mtok: …, …}}`` (``Price``'s fields). Each
    problem is one ``ManifestError`` naming ``where`` (and the entry's field)."""
    import yaml

    assert judge.price_file is not None
    path = Path(judge.price_file).expanduser()
    from ..store.files import read_bounded

    try:  # a regular file only: a FIFO is refused, never waited on
        raw = read_bounded(path, MAX_PRICE_FILE_BYTES)
    except OSError as e:
        raise ManifestError(where, f"cannot read {str(path)!r}: {e.strerror or e}") from None
    except ValueError as e:
        raise ManifestError(where, f"cannot read {str(path)!r}: {e}") from None
    try:
        bounds.check_yaml(raw)
        table = yaml.safe_load(raw)
    except bounds.BoundError as e:
        raise ManifestError(where, f"{str(path)!r}: {e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        raise ManifestError(where, f"{str(path)!r} is not YAML or JSON{at}") from None
    if not isinstance(table, dict):
        raise ManifestError(where, f"{str(path)!r} must map model names to prices "
                                   "({model: {input_per_mtok: ..., output_per_mtok: ...}})")
    if judge.model not in table:
        raise ManifestError(where, f"{str(path)!r} has no entry for model {judge.model!r} "
                                   f"(judge {judge.name!r}; give the judge price: or add the model)")
    try:
        return msgspec.convert(table[judge.model], Price)
    except msgspec.ValidationError as e:
        m = _AT.match(str(e))
        msg, field = (m.group("msg"), m.group("path") or "") if m else (str(e), "")
        raise ManifestError(f"{where}[{judge.model!r}]{field}", f"{str(path)!r}: {msg[:1].lower()}{msg[1:]}") from None

"""Diagnose before judging the judge: a judge whose replies could not be read, or that refused,
is misconfigured, not biased (DESIGN.md, *Verdicts*).

- **unmatched**: more than ``verdict.MISCONFIGURED`` (20 %) of a judge's counted replies are
  invalid — they did not match its verdict pattern (or the built-in parser's ``A``/``B``/
  ``tie``), gave no score inside the scale, or (soft judges) no slot probabilities — overall,
  or in one language. Its cards then carry no ✓/✗ and no bias advice (``score.verdict``,
  ``report.recommend``); this module says why, with the first unmatched replies (secrets
  masked, cut, made terminal-safe) and the pattern.
- **refused**: more than the same share of a judge's calls in the log ended in a rejected
  error (the provider refused the request: 400, 413, 422, a blocked candidate) after retries.
- **truncated**: a judge over the threshold whose unmatched replies were mostly cut at
  ``max_tokens`` — the provider's finish reason, kept in the record (``truncated``: OpenAI's
  ``finish_reason: length``, Anthropic's ``stop_reason: max_tokens``, Gemini's
  ``finishReason: MAX_TOKENS``) — is told apart: raise ``max_tokens``. Judges that are code and
  local models report no finish reason; their cut replies show as unmatched.

``audit`` and ``score`` print each diagnosis's ``line()`` and exit ``EXIT_MISCONFIGURED`` (3)
when there is one and nothing else failed; the report shows them first after the matrix.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core.text import neutralise
from ..judges.protocol import max_tokens
from ..spec import JudgeSpec
from .verdict import MISCONFIGURED

EXIT_MISCONFIGURED = 3  # a judge's replies were unreadable, or it refused (docs/operations.md)
EXAMPLES = 3
EXAMPLE_CHARS = 120
COLUMNS = ["judge_id", "judge", "lang", "verdict", "raw", "truncated"]
LOG_SCHEMA = pa.schema([("judge_id", pa.string()), ("judge", pa.string()), ("status", pa.string()),
                        ("error_kind", pa.string()), ("error", pa.string())])  # the log columns Refusals reads


class Diagnosis(msgspec.Struct, frozen=True):
    judge: str
    judge_id: str
    kind: str  # unmatched | truncated | refused
    share: float
    count: int
    total: int
    lang: str = "all"  # "all": over every language
    pattern: str = ""
    examples: list[str] = []

    def line(self) -> str:
        where = "" if self.lang == "all" else f" in {self.lang}"
        if self.kind == "refused":
            head = f"{self.share:.0%} of calls were refused by the provider{where} ({self.count} of {self.total})"
        elif self.kind == "truncated":
            head = (f"{self.share:.0%} of replies did not match the verdict pattern{where} ({self.count} of "
                    f"{self.total}), most of them cut at max_tokens ({self.pattern}): raise max_tokens")
        else:
            head = (f"{self.share:.0%} of replies did not match the verdict pattern{where} "
                    f"({self.count} of {self.total}); pattern: {self.pattern}")
        shown = "; ".join(repr(e) for e in self.examples)
        return f"{self.judge}: {head}" + (f"; first: {shown}" if shown else "") + \
            " — the judge is misconfigured, not biased: no verdict is given"


def pattern_of(spec: JudgeSpec | None) -> str:
    """The rule a reply had to match, in words."""
    if spec is None:
        return "(unknown: the judge is not in run.yaml)"
    if spec.soft:
        return "slot probabilities of A, B or tie in the first token's log-probabilities"
    if spec.verdict is not None:
        return spec.verdict.pattern
    if spec.protocol == "pointwise":
        from ..judges.protocol import DEFAULT_POINTWISE_VERDICT

        return DEFAULT_POINTWISE_VERDICT.pattern
    return "exactly A, B or tie (the built-in parser)"


def _example(raw: str | None, secrets: Iterable[str]) -> str:
    from ..judges.http import mask

    text = mask(raw or "", secrets, EXAMPLE_CHARS)  # masked before it is cut
    return neutralise(text.replace("\r", "⏎").replace("\n", "⏎"))


def _secrets(specs: Iterable[JudgeSpec]) -> list[str]:
    return [v for s in specs if s.api_key_env and (v := os.environ.get(s.api_key_env))]


def unmatched(data: pa.Table, specs: Mapping[str, JudgeSpec]) -> list[Diagnosis]:
    """``data``: counted records (``COLUMNS``); ``specs`` by judge id. One diagnosis per judge
    over the threshold overall, else one per language over it."""
    out: list[Diagnosis] = []
    if data.num_rows == 0:
        return out
    secrets = _secrets(specs.values())
    ids = data["judge_id"].cast(pa.string())
    for jid in sorted(set(pc.unique(ids).to_pylist())):
        mine = data.filter(pc.equal(ids, jid))
        invalid = pc.fill_null(pc.equal(mine["verdict"].cast(pa.string()), "invalid"), False).to_numpy(
            zero_copy_only=False)
        # the languages as integer codes and the replies as Arrow (no Python object per record:
        # a 500,000-record run's report peaked 40 MB higher on their lists)
        langs = pc.dictionary_encode(mine["lang"].cast(pa.string())).combine_chunks()
        lang = langs.indices.to_numpy(zero_copy_only=False)
        raw = mine["raw"] if "raw" in mine.column_names else pa.nulls(mine.num_rows, pa.string())
        cut = (pc.fill_null(mine["truncated"], False).to_numpy(zero_copy_only=False).astype(bool)
               if "truncated" in mine.column_names else np.zeros(mine.num_rows, dtype=bool))
        name = mine["judge"].cast(pa.string())[0].as_py()
        spec = specs.get(jid)
        pattern = pattern_of(spec)
        budget = f"max_tokens {max_tokens(spec)}" if spec is not None else "max_tokens"
        everywhere = np.ones(len(invalid), dtype=bool)
        overall = _one(name, jid, pattern, invalid, raw, secrets, everywhere, "all", cut, budget)
        if overall is not None:
            out.append(overall)
            continue
        codes = {code: i for i, code in enumerate(langs.dictionary.to_pylist())}
        out += [d for code in sorted(codes)
                if (d := _one(name, jid, pattern, invalid, raw, secrets, lang == codes[code], code, cut, budget))
                is not None]
    return out


def _one(name: str, jid: str, pattern: str, invalid: np.ndarray, raw: pa.ChunkedArray | pa.Array, secrets: list[str],
         where: np.ndarray, code: str, cut: np.ndarray, budget: str) -> Diagnosis | None:
    n, k = int(where.sum()), int((invalid & where).sum())
    if not n or k / n <= MISCONFIGURED:
        return None
    first = [_example(raw[int(i)].as_py(), secrets) for i in np.flatnonzero(invalid & where)[:EXAMPLES]]
    if 2 * int((invalid & where & cut).sum()) > k:  # most unmatched replies were cut at the budget
        return Diagnosis(name, jid, "truncated", round(k / n, 4), k, n, code, budget, first)
    return Diagnosis(name, jid, "unmatched", round(k / n, 4), k, n, code, pattern, first)


class Refusals:
    """Judges more than ``MISCONFIGURED`` of whose logged calls ended in a rejected error,
    tallied a block of log records at a time (``LOG_SCHEMA``'s columns, or more)."""

    def __init__(self) -> None:
        self._tally: dict[str, list[Any]] = {}  # judge id -> [name, calls, rejected, first errors]

    def add(self, batch: pa.RecordBatch) -> None:
        ids = batch.column("judge_id")  # column-wise: a few judges per batch
        rejected = pc.fill_null(pc.and_(pc.equal(batch.column("status"), "error"),
                                        pc.equal(batch.column("error_kind"), "rejected")), False)
        for jid in pc.unique(ids).to_pylist():
            mine = pc.equal(ids, jid)
            t = self._tally.get(jid)
            if t is None:
                t = self._tally[jid] = [batch.column("judge").filter(mine)[0].as_py(), 0, 0, []]
            t[1] += int(pc.sum(mine).as_py() or 0)
            hits = pc.and_(mine, rejected)
            k = int(pc.sum(hits).as_py() or 0)
            t[2] += k
            if k and len(t[3]) < EXAMPLES:
                first = batch.column("error").filter(hits)[: EXAMPLES - len(t[3])].to_pylist()
                t[3] += [neutralise((e or "")[:EXAMPLE_CHARS]) for e in first]

    def diagnoses(self) -> list[Diagnosis]:
        return [Diagnosis(name, jid, "refused", round(k / n, 4), k, n, examples=first)
                for jid, (name, n, k, first) in sorted(self._tally.items()) if n and k / n > MISCONFIGURED]


def refused(run_dir: Path) -> list[Diagnosis]:
    """Judges more than ``MISCONFIGURED`` of whose logged calls ended in a rejected error."""
    from ..store import log

    tally = Refusals()
    for seg in log.segments(run_dir):
        for batch in log.stream_segment(seg, LOG_SCHEMA):
            tally.add(batch)
    return tally.diagnoses()


def of_run(run_dir: Path, refusals: list[Diagnosis] | None = None) -> list[Diagnosis]:
    """Every diagnosis of a run directory (its counted records and its log); ``refusals``:
    ``Refusals.diagnoses()`` of its log, where the caller read the log already."""
    from ..store import compact
    from ..store.rundir import read_run_info

    run_dir = Path(run_dir)
    info = read_run_info(run_dir)
    specs = {info.judge_ids[j.name]: j for j in info.manifest.judges if j.name in info.judge_ids}
    data = compact.load(run_dir, COLUMNS)
    return unmatched(data, specs) + (refused(run_dir) if refusals is None else refusals)

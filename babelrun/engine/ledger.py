"""The cost ledger: what each judge's calls cost, from the provider's reported usage and the
judge's ``price`` (or its ``price_file``), per language and call kind.

Kinds: ``fresh`` (one attempt), ``retried`` (more than one: the failed attempts' usage is not
reported, so only the one that answered is priced), ``batch`` (a provider batch, at its
discount) and ``cached`` (served by the response cache: no call, no cost). A call's cost is
``(plain input × input + cached input × cached_input + cache-written input × cache_write +
output × output) / 10⁶`` (less ``batch_discount`` for a batch), where ``tokens_in`` counts
all three kinds of input; cached input is priced as input where ``cached_input_per_mtok`` is
unset, and input written to the provider's prompt cache (Anthropic's
``cache_creation_input_tokens``) at 1.25 × input where ``cache_write_per_mtok`` is unset
(``CACHE_WRITE_FACTOR``: Anthropic's price for a 5-minute cache write).
"""

from __future__ import annotations

from typing import Any

from ..core.records import Record
from ..spec import JudgeSpec, Price

KINDS = ("fresh", "retried", "batch", "cached")
CACHE_WRITE_FACTOR = 1.25  # a prompt-cache write × input, cache_write_per_mtok unset (Anthropic: 5-minute writes)


def price_of(spec: JudgeSpec) -> Price | None:
    """The judge's price: ``price``, else its model's entry in ``price_file`` (YAML or JSON,
    ``{model: {input_per_mtok: …, …}}``; ``manifest.price_from_file``), else None. The
    manifest's own ``price`` wins over the file."""
    if spec.price is not None or spec.price_file is None:
        return spec.price
    from ..manifest import price_from_file

    return price_from_file(spec)


def cost(price: Price, tokens_in: int | None, tokens_cached: int | None, tokens_out: int | None,
         batch: bool = False, tokens_written: int | None = None) -> float:
    tin, tout = tokens_in or 0, tokens_out or 0
    cached = min(tokens_cached or 0, tin)
    written = min(tokens_written or 0, tin - cached)
    cached_rate = price.input_per_mtok if price.cached_input_per_mtok is None else price.cached_input_per_mtok
    write_rate = (CACHE_WRITE_FACTOR * price.input_per_mtok if price.cache_write_per_mtok is None
                  else price.cache_write_per_mtok)
    usd = ((tin - cached - written) * price.input_per_mtok + cached * cached_rate + written * write_rate
           + tout * price.output_per_mtok) / 1e6
    return usd * (1.0 - price.batch_discount) if batch else usd


def kind_of(record: Record, batch: bool) -> str:
    if record.cached:
        return "cached"
    if batch:
        return "batch"
    return "retried" if record.attempts > 1 else "fresh"


class Ledger:
    """One judge's spend in this process."""

    __slots__ = ("batch", "by_lang", "calls", "lang_calls", "price", "total")

    def __init__(self, price: Price, batch: bool = False):
        self.price, self.batch = price, batch
        self.total = 0.0
        self.by_lang: dict[str, dict[str, float]] = {}
        self.calls: dict[str, int] = {}
        self.lang_calls: dict[str, dict[str, int]] = {}

    def add(self, record: Record) -> float:
        return self.add_counts(record.lang, bool(record.cached), record.attempts, record.tokens_in,
                               record.tokens_cached, record.tokens_out, record.tokens_cache_write)

    def add_counts(self, lang: str, cached: bool, attempts: int, tokens_in: int | None, tokens_cached: int | None,
                   tokens_out: int | None, tokens_written: int | None) -> float:
        """One ok record's cost, from its fields (``add``; ``from_log``)."""
        kind = "cached" if cached else "batch" if self.batch else "retried" if attempts > 1 else "fresh"
        usd = 0.0 if kind == "cached" else cost(self.price, tokens_in, tokens_cached, tokens_out, self.batch,
                                                 tokens_written)
        self.total += usd
        row = self.by_lang.setdefault(lang, {})
        row[kind] = row.get(kind, 0.0) + usd
        self.calls[kind] = self.calls.get(kind, 0) + 1
        counts = self.lang_calls.setdefault(lang, {})
        counts[kind] = counts.get(kind, 0) + 1
        return usd

    @property
    def priced(self) -> int:
        """Calls priced so far (the cache's hits cost nothing and are left out)."""
        return sum(n for k, n in self.calls.items() if k != "cached")

    def expected(self, messages: Any, max_out: int) -> float:
        """What the judge's next call is expected to cost (``--budget``): the mean cost of its
        calls so far; before the first has answered, the request's own size at the price (its
        bytes / 3 as input tokens, ``max_out`` as output: what the rate limiter reserves)."""
        if self.priced:
            return self.total / self.priced
        from .limits import estimate_tokens

        return cost(self.price, estimate_tokens(messages, 0), 0, max_out, self.batch)

    def merge(self, other: Ledger) -> None:
        """Add another process's ledger of the same judge (the Ray executor's shards)."""
        self.total += other.total
        for lang, row in other.by_lang.items():
            mine = self.by_lang.setdefault(lang, {})
            for kind, usd in row.items():
                mine[kind] = mine.get(kind, 0.0) + usd
        for kind, n in other.calls.items():
            self.calls[kind] = self.calls.get(kind, 0) + n
        for lang, counts in other.lang_calls.items():
            mine_n = self.lang_calls.setdefault(lang, {})
            for kind, n in counts.items():
                mine_n[kind] = mine_n.get(kind, 0) + n

    def summary(self) -> dict[str, Any]:
        return {"currency": self.price.currency, "total": round(self.total, 6),
                "by_kind": {k: round(sum(r.get(k, 0.0) for r in self.by_lang.values()), 6)
                            for k in KINDS if k in self.calls},
                "calls_by_kind": dict(sorted(self.calls.items())),
                "by_language": {lang: {k: round(v, 6) for k, v in sorted(row.items())}
                                for lang, row in sorted(self.by_lang.items())},
                "calls_by_language": {lang: dict(sorted(row.items())) for lang, row in sorted(self.lang_calls.items())}}


_LOG_COLUMNS = (("judge_id", "string"), ("status", "string"), ("cached", "bool_"), ("attempts", "int64"),
                ("lang", "string"), ("tokens_in", "int64"), ("tokens_out", "int64"), ("tokens_cached", "int64"),
                ("tokens_cache_write", "int64"))


def from_log(run_dir: Any, priced: dict[str, tuple[Price, bool]]) -> dict[str, dict[str, Any]]:
    """Each priced judge's ledger rebuilt from every ``ok`` record in the log (its tokens,
    cached tokens and call kind, at the judge's price), as ``Ledger.summary`` gives it.
    ``priced``: judge id → (price, whether it calls through provider batches). The log is
    the source of truth: what a process killed before writing stats.json spent is in its
    records, so the spend after any number of crashes is the uninterrupted run's (calls in
    flight at a kill left no record: they are not in it, and were paid again on the resume)."""
    import pyarrow as pa

    from ..store.log import read_table

    table = read_table(run_dir, pa.schema([(n, getattr(pa, t)()) for n, t in _LOG_COLUMNS]))
    ledgers = {jid: Ledger(price, batch) for jid, (price, batch) in priced.items()}
    columns = [table[n].to_pylist() for n, _ in _LOG_COLUMNS]
    for jid, status, cached, attempts, lang, t_in, t_out, t_cached, t_written in zip(*columns, strict=True):
        ledger = ledgers.get(jid)
        if ledger is None or status != "ok":
            continue
        ledger.add_counts(lang, bool(cached), attempts or 1, t_in, t_cached, t_out, t_written)
    return {jid: ledger.summary() for jid, ledger in ledgers.items()}

"""Audit verdicts you already have: ``backend: replay`` reads a judge's verdicts from a file
instead of asking a model, so the whole pipeline (cards, ``agree``, ``pin``, the report) runs
on released judge outputs or your own annotation logs, and makes no call.

``replay: {path, judge}`` names the file. Three shapes are read (``.jsonl``/``.ndjson``,
``.json``, ``.csv`` or ``.parquet``):

- **babelrun's own export** (``presentations`` of ``babelrun export RUN``): rows with
  ``item_id``, ``ref_id``, ``order``, ``slot`` (or ``verdict``), ``score``, ``raw``; ``judge``
  picks one judge of an export that holds several.
- **a generic table**: ``id`` (a pair id, a reference id or an item id), the presentation —
  ``order`` (``ref_first`` / ``pert_first``, babelrun's frame; ``reference`` / ``degraded`` for
  a pointwise judge) or ``swap`` (false: the data's ``output_1`` shown first) — and the
  verdict: ``verdict`` (the slot named: ``A``, ``B``, ``tie``, ``invalid``; or ``reference`` /
  ``perturbed`` with ``order``), ``winner`` (the data's output: ``1``, ``2``, ``tie``) or
  ``score`` (pointwise), with ``raw`` kept in the log where the row has it. A row keyed by
  ``swap`` carries the texts shown (``output_1``, ``output_2``), since only they say which
  output stood in slot A; a row with ``answer_a`` / ``answer_b`` is keyed by them.
- **LLMBar's evaluator outputs** (``Dataset/**/evaluators/<model>/<method>/result.json``):
  each pair's ``output_1``, ``output_2`` and ``results[0]["swap = False" | "swap = True"]``
  with its ``winner`` and ``completion`` (the raw reply).

A presentation is found by its item id, then its pair or reference id (where that id names
one presentation only), then by the texts it shows. A presentation the file has no verdict
for is **not judged**: its record fails with ``not_in_replay`` (never counted, never
guessed), the audit reports it, and a later audit with a fuller file judges it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec

from ..corpus import pairtable
from ..spec import JudgeOptions, JudgeSpec, ReplaySpec
from . import replay_table
from .base import JudgeReply, JudgeRequest, RejectedError
from .registry import options_of
from .replay_table import _AMBIGUOUS, Key, Verdict, text_key

__all__ = ["Key", "ReplayJudge", "ReplayOptions", "ReplaySpec", "Verdict", "check", "entries", "load", "text_key"]


class ReplayOptions(JudgeOptions, frozen=True):
    """A replay judge's option: ``replay`` (``ReplaySpec``: the file and which judge of it); its
    judge_id holds the file's content hash, never its path."""

    replay: ReplaySpec | None = None

    def identity(self) -> dict[str, Any]:
        from .identity import replay_identity

        return {} if self.replay is None else {"replay": replay_identity(self.replay)}

ORDERS = ("ref_first", "pert_first", "reference", "degraded")
SLOTS = ("A", "B", "tie", "invalid")




def _rows(path: Path) -> Iterator[dict[str, Any]]:
    """The file's rows, streamed: Parquet in batches; CSV, JSON and JSON Lines through the
    table reader (bounded, duplicated keys refused: corpus/pairtable.py)."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(path).iter_batches(batch_size=4096):
            yield from batch.to_pylist()
    elif suffix in (".csv", ".tsv", ".json", ".jsonl", ".ndjson"):
        for _, row in pairtable.rows(path):
            yield row
    else:
        raise ValueError(f"{path}: a replay file is .jsonl, .json, .csv or .parquet")


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _swap(value: Any) -> bool:
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError(f"swap {value!r} is not true or false")


def _winner_slot(winner: Any, swapped: bool) -> str:
    """The slot of the data's output ``winner`` (1, 2, tie) when ``swapped`` shows output_2 first."""
    w = str(winner).strip().lower()
    if w in ("tie", "0", "3"):
        return "tie"
    if w not in ("1", "2"):
        return "invalid"
    return "A" if (w == "1") != swapped else "B"


def _slot(row: Mapping[str, Any], order: str | None) -> str | None:
    """The slot a row names: ``slot`` (an export's), else ``verdict`` as a slot, or as
    reference / perturbed with its order."""
    value = _text(row.get("slot")) or _text(row.get("verdict"))
    if value is None:
        return None
    if value.lower() == "tie":
        return "tie"
    if value.upper() in ("A", "B"):
        return value.upper()
    if value in ("reference", "perturbed") and order in ("ref_first", "pert_first"):
        return "A" if (value == "reference") == (order == "ref_first") else "B"
    if value == "invalid":
        return "invalid"
    raise ValueError(f"verdict {value!r} is not A, B, tie or invalid (or reference / perturbed with an order)")


def _score(row: Mapping[str, Any]) -> float | None:
    value = row.get("score")
    if value is None or value == "":
        return None
    return float(value)


def _shown(row: Mapping[str, Any], swapped: bool) -> tuple[Any, Any]:
    """The data's two outputs in the order they were shown: output_2 first when ``swapped``."""
    return (row["output_2"], row["output_1"]) if swapped else (row["output_1"], row["output_2"])


def _llmbar(row: Mapping[str, Any]) -> Iterator[tuple[Key, Verdict]]:
    """LLMBar's evaluator output: each swap's winner and completion, keyed by the texts shown."""
    for result in row["results"][:1]:
        for label, swapped in (("swap = False", False), ("swap = True", True)):
            if isinstance(result, dict) and isinstance(result.get(label), dict):
                got = result[label]
                completion = got.get("completion")
                raw = str(completion[0]) if isinstance(completion, list) and completion else None
                a, b = _shown(row, swapped)
                yield text_key(a, b), Verdict(_winner_slot(got.get("winner"), swapped), None, raw)


def _by_swap(row: Mapping[str, Any], score: float | None, raw: str | None) -> tuple[Key, Verdict]:
    """A row keyed by ``swap``: the texts it shows say which output stood in slot A."""
    swapped = _swap(row["swap"])
    if row.get("output_1") is None or row.get("output_2") is None:
        raise ValueError("a row keyed by swap carries the texts shown (output_1, output_2); "
                         "or key it by order (ref_first / pert_first)")
    a, b = _shown(row, swapped)
    slot = _winner_slot(row["winner"], swapped) if row.get("winner") not in (None, "") else _slot(row, None)
    return text_key(a, b), Verdict(slot, score, raw)


def _by_order(row: Mapping[str, Any], score: float | None, raw: str | None) -> Iterator[tuple[Key, Verdict]]:
    """A row keyed by ``order``: under each of its ids, or by ``answer_a`` / ``answer_b``."""
    order = _text(row.get("order"))
    slot = _slot(row, order)
    if slot is None and score is None:
        raise ValueError("no verdict (slot, verdict, winner or score)")
    verdict = Verdict(slot, score, raw)
    if row.get("answer_a") is not None and row.get("answer_b") is not None:
        yield text_key(row["answer_a"], row["answer_b"]), verdict
        return
    if order not in ORDERS:
        raise ValueError(f"order {order!r} is not one of {', '.join(ORDERS)} (or give swap and the texts)")
    ids = [i for i in (_text(row.get(k)) for k in ("item_id", "id", "ref_id")) if i is not None]
    if not ids:
        raise ValueError("no id (item_id, id or ref_id), swap or answer_a / answer_b")
    for i in dict.fromkeys(ids):
        yield ("id", i, order), verdict


def _row_entries(row: Mapping[str, Any]) -> Iterator[tuple[Key, Verdict]]:
    """One row's verdicts, each with its key, in whichever of the three shapes the row has."""
    if isinstance(row.get("results"), list):
        yield from _llmbar(row)
        return
    raw = None if row.get("raw") is None else str(row["raw"])
    score = _score(row)
    if row.get("swap") not in (None, ""):
        yield _by_swap(row, score, raw)
        return
    yield from _by_order(row, score, raw)


def entries(rows: Iterable[Mapping[str, Any]], judge: str | None = None) -> dict[Key, Any]:
    """The file's verdicts by key: ``("id", id, order)`` and ``("text", answer_a, answer_b)``.
    An id that names two different verdicts for one order is ambiguous and no key."""
    out: dict[Key, Any] = {}
    judges: set[str] = set()

    def put(key: Key, verdict: Verdict) -> None:
        if key in out and out[key] != verdict:
            out[key] = _AMBIGUOUS
        else:
            out.setdefault(key, verdict)

    for n, row in enumerate(rows):
        name = _text(row.get("judge"))
        if judge is not None and name is not None and name != judge:
            continue
        if name is not None:
            judges.add(name)
        if _text(row.get("status")) not in (None, "ok"):
            continue  # an export's failed record: no verdict
        try:
            for key, verdict in _row_entries(row):
                put(key, verdict)
        except (KeyError, ValueError, TypeError) as e:
            raise ValueError(f"row {n}: {e}") from None
    if judge is None and len(judges) > 1:
        raise ValueError(f"the file holds verdicts of several judges ({', '.join(sorted(judges)[:5])}): "
                         "set replay.judge to one of them")
    return {k: v for k, v in out.items() if v is not _AMBIGUOUS}


def load(replay: ReplaySpec) -> dict[tuple[str, ...], Any]:
    if getattr(replay, "columns", None) or getattr(replay, "join", None):
        return replay_table.load(replay)
    return entries(_rows(Path(replay.path)), replay.judge)


class ReplayJudge:
    """Answers every request from the replay file; no model, no network."""

    def __init__(self, spec: JudgeSpec, judge_id: str, seed: int = 0):
        # A file without a verdict for a run of keys is no broken judge: its misses
        # (``not_in_replay``) are recorded as not judged and never trip the engine's breaker.
        self.spec = spec
        self.judge_id = judge_id
        self.replay = options_of(spec, ReplayOptions).replay
        self._verdicts: dict[tuple[str, ...], Any] | None = None
        self.calls = 0  # requests answered from the file (none reaches a network)

    def _lookup(self, request: JudgeRequest) -> Verdict | None:
        if self._verdicts is None:
            assert self.replay is not None  # check() refuses a replay judge without one
            self._verdicts = load(self.replay)
        item, order = request.item, str(request.order)
        for key in (("id", item.item_id, order), ("id", item.ref_id, order)):
            if key in self._verdicts:
                found: Verdict = self._verdicts[key]
                return found
        if order in ("ref_first", "pert_first"):
            found_text: Verdict | None = self._verdicts.get(text_key(request.answer_a, request.answer_b))
            return found_text
        return None

    async def judge(self, request: JudgeRequest) -> JudgeReply:
        self.calls += 1
        got = self._lookup(request)
        if got is None or (got.slot is None and got.score is None):
            raise RejectedError("not_in_replay",
                                f"{self.replay.path if self.replay else ''} has no verdict for item "
                                f"{request.item.item_id} ({request.item.ref_id}), {request.order}")
        raw = got.raw if got.raw is not None else (got.slot if got.slot is not None else str(got.score))
        return JudgeReply(raw=raw, slot=got.slot, score=got.score, probs=got.probs)

    async def aclose(self) -> None:
        pass


def check(spec: JudgeSpec, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """The manifest's check of a replay judge: a readable file whose rows are verdicts."""
    replay = options_of(spec, ReplayOptions).replay
    if replay is None:
        return "replay", f"judge {spec.name!r}: the replay backend needs replay: {{path: FILE}}"
    path = Path(replay.path)
    if not path.exists():
        return "replay.path", f"not found: {path}"
    wrong = _check_mapping(replay)
    if wrong is not None:
        return wrong
    try:
        found = load(replay)
    except pairtable.TableError as e:  # names the file (and row) itself
        return "replay.path", str(e)
    except (ValueError, msgspec.DecodeError, OSError) as e:
        return "replay.path", f"{path}: {e}"
    except Exception as e:  # a Parquet file that is none
        return "replay.path", f"{path}: {type(e).__name__}: {e}"
    if not found:
        return "replay.path", f"{path}: no verdict in the file" + (
            f" for judge {replay.judge!r}" if replay.judge else "")
    return None


def _check_mapping(replay: ReplaySpec) -> tuple[str, str] | None:
    """A mapped table's field names (the did-you-mean from the replay table's own fields)."""
    import difflib

    given = [("replay.columns", name) for name in getattr(replay, "columns", {})]
    given += [(f"replay.join[{i}].columns", name) for i, j in enumerate(getattr(replay, "join", []))
              for name in j.columns]
    for where, name in given:
        if name not in replay_table.FIELDS:
            close = difflib.get_close_matches(name, replay_table.FIELDS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            return f"{where}.{name}", f"unknown field{hint} (fields: {', '.join(replay_table.FIELDS)})"
    return None

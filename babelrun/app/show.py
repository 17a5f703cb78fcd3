"""``babelrun show RUN ITEM_ID``: one item as each judge saw it, and what each judge said.

The log keeps no texts (records are a few hundred bytes whatever the answers' length), so the
item is regenerated from the run's manifest and corpus (``plan.lookup``, as the report's
examples are) and each presentation's request is rendered again with the judge's own
template and prompt language — the same function the engine called, so the same messages.
The records give each presentation's raw reply, verdict, latency and attempts.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import NotApplicable, UserError
from ..store import compact
from ..store.rundir import RunDir

_COLUMNS = ["judge_id", "judge", "item_id", "kind", "lang", "ref_id", "perturbation", "severity", "order",
            "verdict", "slot", "raw", "latency_ms", "attempts", "served_model", "p_a", "p_b", "p_tie"]


class Presentation(msgspec.Struct, frozen=True):
    judge: str
    judge_id: str
    order: str
    messages: list[dict[str, str]] | None  # None: the item's texts could not be regenerated
    raw: str | None
    slot: str | None
    verdict: str | None
    latency_ms: float | None
    attempts: int
    served_model: str | None = None
    probs: tuple[float | None, float | None, float | None] | None = None


class Shown(msgspec.Struct, frozen=True):
    item_id: str
    kind: str
    lang: str
    perturbation: str
    severity: float
    prompt: str | None
    reference: str | None
    perturbed: str | None
    presentations: list[Presentation]
    note: str | None = None


def _records(run_dir: Path, item_id: str) -> list[dict]:
    data = compact.load(run_dir, _COLUMNS)
    ids = data["item_id"].cast(pa.string())
    mine = data.filter(pc.equal(ids, item_id))
    if mine.num_rows == 0:  # a unique prefix is enough, as with git commits
        near = pc.unique(ids.filter(pc.starts_with(ids, item_id))).to_pylist()
        if len(near) > 1:
            raise NotApplicable(f"item id {item_id!r} is ambiguous in {run_dir}: {', '.join(sorted(near)[:5])}")
        if not near:
            raise NotApplicable(f"no counted record of item {item_id!r} in {run_dir} (ids: judgements.parquet, "
                                "report.html's examples)")
        mine = data.filter(pc.equal(ids, near[0]))
    rows = mine.to_pylist()
    return sorted(rows, key=lambda r: (r["judge"], r["judge_id"], r["order"] != "ref_first"))


def show(run_dir: str | Path, item_id: str, judge: str | None = None) -> Shown:
    from .. import corpus
    from ..judges.protocol import Judging
    from ..plan.lookup import lookup

    run_dir = Path(run_dir)
    info = RunDir(run_dir).info()
    rows = _records(run_dir, item_id)
    if judge is not None:
        rows = [r for r in rows if r["judge"] == judge]
        if not rows:
            raise NotApplicable(f"judge {judge!r} has no record of item {item_id!r} in {run_dir}")
    first = rows[0]
    note = None
    try:
        item = lookup(info.manifest, corpus.select(info.manifest), [first]).get(first["item_id"])
    except (UserError, OSError, ValueError) as e:
        item, note = None, f"the corpus is no longer readable ({e}): texts unavailable"
    if item is None and note is None:
        note = "the item could not be regenerated from the corpus (changed since the run?): texts unavailable"
    # Each judge's own protocol, as the engine built it: its template (built-in, inline, a
    # file's or a collection's text, kept in run.yaml), its fields, both orders or both answers.
    protocols = {s.name: Judging.of(s) for s in info.manifest.judges}
    out = []
    for r in rows:
        protocol = protocols.get(r["judge"])
        messages = None
        if item is not None and protocol is not None:
            messages = protocol.request(item, r["order"]).messages
        probs = (r["p_a"], r["p_b"], r["p_tie"]) if r["p_a"] is not None else None
        out.append(Presentation(r["judge"], r["judge_id"], r["order"], messages, r["raw"], r["slot"], r["verdict"],
                                r["latency_ms"], r["attempts"] or 1, r["served_model"], probs))
    return Shown(first["item_id"], first["kind"], first["lang"], first["perturbation"], first["severity"],
                 item.prompt if item else None, item.reference if item else None, item.perturbed if item else None,
                 out, note)


def text(s: Shown) -> str:
    """The item for a terminal: its texts once, then each presentation's request and reply."""
    out = [f"item {s.item_id}: {s.kind}, {s.lang}, {s.perturbation} {s.severity:g}"]
    if s.note:
        out.append(f"note: {s.note}")
    else:
        out += ["", "--- question", s.prompt or "", "", "--- reference (the better answer)", s.reference or "", "",
                f"--- perturbed ({s.perturbation} {s.severity:g})", s.perturbed or ""]
    for p in s.presentations:
        latency = "–" if p.latency_ms is None else f"{p.latency_ms:g} ms"
        out += ["", f"=== {p.judge} ({p.judge_id}), {p.order}: reply {p.raw!r} -> slot {p.slot or '–'}, "
                f"verdict {p.verdict or '–'}; {latency}, {p.attempts} attempt(s)"
                + (f"; served by {p.served_model}" if p.served_model else "")
                + (f"; P(A, B, tie) = {p.probs}" if p.probs else "")]
        for m in p.messages or []:
            out += [f"--- {m['role']}", m["content"]]
    return "\n".join(out) + "\n"

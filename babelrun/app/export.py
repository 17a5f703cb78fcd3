"""``babelrun export RUN``: a run as two flat tables for pandas, polars, DuckDB or a spreadsheet.

- ``cards``: one row per (judge, language, perturbation, metric) — ``score.tidy`` — with the
  run's name: ``run, judge, judge_id, family, lang, perturbation, metric, value, lo, hi, n``.
- ``presentations``: one row per counted record (one per judge, item and order) with a
  ``correct`` column (the judge chose the reference; null where an item has no gold label,
  e.g. translation tie probes), ``ts`` as a UTC timestamp and ``attempts`` always set.
  judgements.parquet's ``item_key`` (an integer form of ``item_id`` for grouping) is left out.

Formats: ``parquet``, ``csv``, or ``json`` (JSON Lines: one object per row).

CSV is opened in spreadsheets, which run a cell that begins with ``=``, ``+``, ``-`` or ``@``
(or a tab or carriage return) as a formula: a judge's name, a corpus id or a
provider's ``system_fingerprint`` of ``=HYPERLINK(...)`` would be one. In CSV, every text
cell that begins with one of those characters and is not a number gets a leading ``'``
(OWASP's advice: the spreadsheet shows the text, not a formula); numeric columns and text
that is a number (``-0.5``) are never touched. Parquet and JSON
keep every value verbatim.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import UsageError
from ..score import Cards, decode
from ..score.run import CARDS_JSON
from ..store import compact
from ..store.files import safe_dir, write_atomic
from ..store.rundir import RunDir

FORMATS = ("parquet", "csv", "json")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # a CSV text cell beginning so is prefixed with '
_NUMBER = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"  # "-0.5" is a number, not a formula


def neutralise_formulas(table: pa.Table) -> pa.Table:
    """``table`` with a ``'`` before each text cell that a spreadsheet would read as a formula
    (see the module docstring); numeric, boolean and timestamp columns are left alone."""
    columns = []
    for col in table.columns:
        if pa.types.is_dictionary(col.type):
            col = col.cast(pa.string())
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            first = pc.utf8_slice_codeunits(col, 0, 1)
            risky = pc.and_(pc.fill_null(pc.is_in(first, pa.array(FORMULA_STARTS, col.type)), False),
                            pc.invert(pc.fill_null(pc.match_substring_regex(col, _NUMBER), False)))
            col = pc.if_else(risky, pc.binary_join_element_wise(pa.scalar("'", col.type), col, ""), col)
        columns.append(col)
    return pa.table(columns, names=table.column_names)
UNGRADED_KINDS = ("tie_probe",)  # no better answer: no ``correct``


def cards_of(run_dir: Path) -> Cards:
    """The run's cards: cards.json where the log has not grown since, else scored afresh."""
    from ..score.run import cards_of_run

    path = run_dir / CARDS_JSON
    parquet = run_dir / compact.PARQUET
    if path.exists() and compact.is_current(run_dir) and path.stat().st_mtime >= parquet.stat().st_mtime:
        return decode(path.read_bytes())
    return cards_of_run(run_dir)


def presentations(run_dir: Path) -> pa.Table:
    data = compact.load(run_dir)
    data = data.drop_columns([c for c in ("item_key",) if c in data.column_names])
    plain = {name: (col.cast(pa.string()) if pa.types.is_dictionary(col.type) else col)
             for name, col in zip(data.column_names, data.columns, strict=True)}
    plain["attempts"] = pc.fill_null(plain["attempts"], 1)
    plain["ts"] = pc.cast(pc.multiply(plain["ts"], 1e6).cast(pa.int64()), pa.timestamp("us", tz="UTC"))
    graded = pc.invert(pc.is_in(plain["kind"], pa.array(UNGRADED_KINDS)))
    wanted = pc.if_else(pc.equal(plain["kind"], "labelled_tie"), "tie", "reference")  # a tie-labelled pair: tie
    correct = pc.if_else(graded, pc.equal(plain["verdict"], wanted), pa.scalar(None, pa.bool_()))
    table = pa.table(plain)
    return table.add_column(table.schema.get_field_index("verdict") + 1, "correct", correct)


def _write(table: pa.Table, path: Path, fmt: str) -> None:
    import io

    buf = io.BytesIO()
    if fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, buf)
    elif fmt == "csv":
        import pyarrow.csv as pcsv

        pcsv.write_csv(neutralise_formulas(table), buf)
    else:
        import msgspec

        rows = table.to_pylist()
        for row in rows:
            for k, v in row.items():
                if hasattr(v, "isoformat"):
                    row[k] = v.isoformat()
        buf.write(b"".join(msgspec.json.encode(r) + b"\n" for r in rows))
    write_atomic(path, buf.getvalue())


def export(run_dir: str | Path, out_dir: str | Path | None = None, fmt: str = "parquet") -> list[Path]:
    """Write ``cards.FMT`` and ``presentations.FMT`` under ``out_dir`` (default RUN/export)."""
    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    run_dir = Path(run_dir)
    info = RunDir(run_dir).info()
    # RUN/export is made where missing and refused where it is a link (the run directory may
    # be someone else's); an --out the user names is theirs.
    out = safe_dir(Path(out_dir)) if out_dir is not None else safe_dir(run_dir, "export")
    ext = "jsonl" if fmt == "json" else fmt
    written = []
    for name, table in (("cards", cards_of(run_dir).to_arrow(info.manifest.name)),
                        ("presentations", presentations(run_dir))):
        path = out / f"{name}.{ext}"
        _write(table, path, fmt)
        written.append(path)
    return written

"""``babelrun agree``'s labels: the run's own labelled sources, or a label file read like a
source (``LabelOptions``: ``columns``, ``label_map``, ``join``), matched to the run's pairs
(module docstring of ``agree``)."""

from __future__ import annotations

from pathlib import Path

import msgspec

from ..corpus import labelled
from ..errors import NotApplicable
from ..spec import JoinSpec, LabelledPairsSource
from ..store.rundir import read_run_info

OWN_LABELS = "the run's labelled sources"


def _sources(run_dir: Path) -> list[LabelledPairsSource]:
    sources = [s for s in read_run_info(run_dir).manifest.corpus.sources if isinstance(s, LabelledPairsSource)]
    for source in sources:
        path = labelled.path_of(source)  # no path: the pairs bundled with babelrun
        if not path.exists():
            raise NotApplicable(f"the run's labelled pairs are gone from {path}: agree reads "
                                "their gold labels there")
    return sources


def _run_pairs(sources: list[LabelledPairsSource]) -> dict[str, tuple[str, str, str]]:
    """The run's labelled pairs: id → (output_1, output_2, gold label "1" | "2" | "tie"), read
    from the data the run was built from, since only the data knows which output was numbered
    1. Pairs without a majority label were never planned and are not here."""
    pairs = {}
    for source in sources:
        try:
            golds = [(pid, row, g) for pid, _, row, g in labelled.gold(source) if g is not None]
        except (msgspec.DecodeError, ValueError) as e:
            raise NotApplicable(f"{labelled.path_of(source)}: not labelled pairs ({e})") from None
        for pair_id, row, g in golds:
            # the first source wins an id: another language condition of a pair shares its
            # alignment id (per-condition accuracy is `babelrun invariance`'s)
            pairs.setdefault(pair_id, (row.output_1, row.output_2, g))
    return pairs


def _own_votes(sources: list[LabelledPairsSource]) -> dict[str, dict[str, str]]:
    """The run's own labels (each source's labels with its mapping; the first source wins an id)."""
    votes: dict[str, dict[str, str]] = {}
    for source in sources:
        try:
            for pair_id, _, _, v in labelled.votes(source):
                votes.setdefault(pair_id, v)
        except (msgspec.DecodeError, ValueError) as e:
            raise NotApplicable(f"{labelled.path_of(source)}: not labelled pairs ({e})") from None
    return votes


class LabelOptions(msgspec.Struct, frozen=True):
    """How a label file given to agree is read: the labelled_pairs source's options."""

    columns: dict[str, str | list[str]] = {}
    label_map: dict[int | str, int | str] | None = None
    join: list[JoinSpec] = []
    delimiter: str | None = None


def _read_labels(labels_path: Path, options: LabelOptions) -> tuple[dict[str, dict[str, str]], dict]:
    if not (labels_path.suffix.lower() in (".csv", ".tsv", ".json", ".jsonl", ".ndjson") or labels_path.is_dir()):
        raise NotApplicable(f"{labels_path}: labels are a table (.csv, .json, .jsonl), a dataset.json or a "
                            "folder of them")
    try:
        return labelled.read_label_file(labels_path, options.label_map, options.columns, options.join,
                                        options.delimiter)
    except msgspec.DecodeError as e:
        raise NotApplicable(f"{labels_path}: not LLMBar pairs ({e})") from None
    except ValueError as e:
        raise NotApplicable(str(e)) from None


def _human(votes: dict[str, dict[str, str]], texts: dict, data: dict,
           own: bool = False) -> tuple[dict[str, dict[str, str]], list[str], list[str], int]:
    """Human labels in the data's numbering: (id → {annotator: label}, unknown ids,
    mismatched ids, labels read). A label is renumbered when its file lists the two outputs
    the other way round. ``own``: the run's own labels, whose pairs without a majority were
    never planned (counted as no majority, not as unknown)."""
    human: dict[str, dict[str, str]] = {}
    unknown, mismatched = [], []
    for pid, v in votes.items():
        if pid not in data and not (own and labelled.majority(list(v.values())) is None):
            unknown.append(pid)
            continue
        if pid in texts and pid in data:
            ours, theirs = data[pid][:2], texts[pid]
            if theirs != ours and theirs[::-1] != ours:
                mismatched.append(pid)
                continue
            if theirs != ours:
                v = {a: {"1": "2", "2": "1"}.get(x, x) for a, x in v.items()}
        human[pid] = v
    return human, unknown, mismatched, sum(len(v) for v in votes.values())



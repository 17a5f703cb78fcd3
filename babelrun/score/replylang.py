"""Reply language: how often a judge that writes prose before its verdict writes it in another
language than the item's (users of other tools report judges reasoning in English on
non-English items), and whether its verdicts are worse when it does.

Per reply with a verdict (a record's ``raw`` text; an unreadable reply is counted in
``invalid_rate``, not here): the **prose** is its words of two or more letters once
bracketed and bold verdict marks (``[[A]]``, ``**B**``) and code spans are set aside; a reply
with fewer than ``MIN_WORDS`` such words or ``MIN_LETTERS`` letters (``A``, ``Answer: B``,
``[[A]]``) has no prose and is not counted. The prose is split into sentences
(``perturb.script``), each sentence of two or more words is identified, and the reply is *in
the item's language* when the sentences identified as it (``langcodes`` distance under 10:
``pt-BR`` is ``pt``, ``fil`` is ``tl``) hold at least half of the identified letters — so a
mixed reply counts by what most of it is written in. A language the identifier does not know
is not counted.

The identifier is ``py3langid`` (Lui & Baldwin's langid.py, re-packaged: 142 languages, pure
Python on numpy, ~0.2 ms a sentence) rather than ``lingua-language-detector`` (more accurate
on a few words, but compiled wheels holding ~1 GB of models): replies that hold prose are
sentences long, and every identification is cached per (text, language).

Each card gets ``reply_language`` where its replies hold prose: the replies counted, the share
not in the item's language (a Wilson interval over replies), and accuracy (the share of
presentations naming the reference) among the replies in the item's language and among the
others, each where both groups have at least ``MIN_GROUP`` replies. Cards of judges whose
replies hold no prose are unchanged (the field is absent from cards.json).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import regex

from .stats import Interval, rounded, wilson

IDENTIFIER = "py3langid"
MIN_WORDS = 4
MIN_LETTERS = 20
MIN_GROUP = 20
SAME_LANGUAGE = 10  # langcodes.tag_distance below this: the same language
COLUMNS = ["judge_id", "lang", "perturbation", "raw", "verdict", "kind"]

_MARKS = regex.compile(r"\[\[[^\]]{0,40}\]\]|\*\*[^*]{0,40}\*\*|`[^`]*`")
_WORD = regex.compile(r"\p{L}[\p{L}\p{M}'’\-]*")


class ReplyLanguage(msgspec.Struct, frozen=True):
    replies: int  # replies with prose, in a language the identifier knows
    not_in_item_language: Interval
    accuracy_in_language: Interval | None = None  # where both groups hold MIN_GROUP replies
    accuracy_other: Interval | None = None
    identifier: str = IDENTIFIER


@functools.lru_cache(maxsize=1)
def _identifier() -> Any:
    import py3langid.langid as langid

    return langid.LanguageIdentifier.from_modelpath(langid.MODEL_DIR / langid.MODEL_FILE)


@functools.lru_cache(maxsize=1024)
def _known(lang: str) -> str | None:
    """The identifier's label for ``lang`` (None where it has none)."""
    import langcodes

    labels = [str(label) for label in _identifier().nb_classes]
    base = lang.split("-", 1)[0].lower()
    if base in labels:
        return base
    best = min(labels, key=lambda label: langcodes.tag_distance(lang, label))
    return best if langcodes.tag_distance(lang, best) < SAME_LANGUAGE else None


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text) if len(w) >= 2]


@functools.lru_cache(maxsize=4096)
def classify(raw: str, lang: str) -> int:
    """1: the reply's prose is not in ``lang``; 0: it is; -1: no prose, or a language the
    identifier does not know (not counted)."""
    from ..perturb import script

    prose = _MARKS.sub(" ", raw or "")
    words = _words(prose)
    if len(words) < MIN_WORDS or sum(map(len, words)) < MIN_LETTERS:
        return -1  # first: most replies of most judges are a bare verdict
    target = _known(lang)
    if target is None:
        return -1
    ident = _identifier()
    parts = [p.text for p in script.sentences(prose) if len(_words(p.text)) >= 2] or [prose]
    same = total = 0
    for part in parts:
        letters = sum(map(len, _words(part)))
        label = str(ident.classify(part)[0])
        total += letters
        same += letters if label == target else 0
    return 0 if same * 2 >= total else 1


def _share(k: int, n: int) -> Interval:
    lo, hi = wilson(np.array([k]), np.array([n]))
    return Interval(rounded(k / n), rounded(float(lo[0])), rounded(float(hi[0])), n)


def summary(cls: np.ndarray, correct: np.ndarray) -> ReplyLanguage | None:
    counted = cls >= 0
    n = int(counted.sum())
    if n == 0:
        return None
    other = cls == 1
    out = ReplyLanguage(n, _share(int(other.sum()), n))
    inside = cls == 0
    if inside.sum() >= MIN_GROUP and other.sum() >= MIN_GROUP:
        out = msgspec.structs.replace(out, accuracy_in_language=_share(int(correct[inside].sum()), int(inside.sum())),
                                      accuracy_other=_share(int(correct[other].sum()), int(other.sum())))
    return out


def _arrays(table: pa.Table) -> dict[str, np.ndarray]:
    verdict = table["verdict"].cast(pa.string()).fill_null("invalid")
    # replies with a verdict only: an unreadable one is counted as such (invalid_rate), not here
    raw = pc.if_else(pc.equal(verdict, "invalid"), "", table["raw"].cast(pa.string()).fill_null("")).to_pylist()
    lang = table["lang"].cast(pa.string()).to_pylist()
    seen: dict[tuple[str, str], int] = {}  # a row group's repeated replies identified once
    cls = []
    for key in zip(raw, lang, strict=True):
        if key not in seen:
            seen[key] = classify(*key)
        cls.append(seen[key])
    return {"judge_id": np.array(table["judge_id"].cast(pa.string()).to_pylist(), dtype=object),
            "lang": np.array(lang, dtype=object),
            "perturbation": np.array(table["perturbation"].cast(pa.string()).to_pylist(), dtype=object),
            "cls": np.array(cls, dtype=np.int8),
            "correct": pc.equal(verdict, "reference").to_numpy(zero_copy_only=False)}


def read_replies(run_dir: Path) -> dict[str, np.ndarray] | None:
    """The per-record columns, a row group at a time: the reply texts of one row group are in
    memory at once, never the log's (a judge's replies may be kilobytes each)."""
    from ..store import compact

    f = compact.parquet_file(run_dir)
    if not set(COLUMNS) <= set(f.schema_arrow.names):  # an old log without raw replies
        return None
    parts = []
    for i in range(f.metadata.num_row_groups):
        group = f.read_row_group(i, columns=COLUMNS)
        not_probe = pc.invert(pc.fill_null(pc.equal(group["kind"].cast(pa.string()), "probe"), False))
        parts.append(_arrays(group.filter(not_probe)))  # the probes' cards are their own family
    if not parts:
        return None
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _with(card: Any, cols: dict[str, np.ndarray], mask: np.ndarray) -> Any:
    found = summary(cols["cls"][mask], cols["correct"][mask])
    return card if found is None else msgspec.structs.replace(card, reply_language=found)


def with_reply_language(judges: Sequence[Any], cols: dict[str, np.ndarray]) -> list[Any]:
    out = []
    for jc in judges:
        mine = cols["judge_id"] == jc.judge_id
        if not (cols["cls"][mine] >= 0).any():
            out.append(jc)
            continue
        langs = []
        for lc in jc.languages:
            in_lang = mine & (cols["lang"] == lc.lang)
            perts = [msgspec.structs.replace(p, card=_with(p.card, cols, in_lang & (cols["perturbation"]
                                                                                 == p.perturbation)))
                     for p in lc.perturbations]
            langs.append(msgspec.structs.replace(lc, card=_with(lc.card, cols, in_lang), perturbations=perts))
        out.append(msgspec.structs.replace(jc, overall=_with(jc.overall, cols, mine), languages=langs))
    return out



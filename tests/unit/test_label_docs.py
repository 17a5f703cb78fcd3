"""Every YAML snippet on the pages of label and verdict tables (docs/data.md, docs/replay.md)
validates: merged into a minimal manifest and decoded by the manifest's types (an unknown
field or a wrong type fails), and the MT-Bench source, pointed at the MT-Bench-shaped fixture,
passes the source's own checks — the files read as the page says."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from babelrun.corpus import labelled
from babelrun.errors import ManifestError
from babelrun.manifest import decode
from babelrun.spec import LabelledPairsSource
from helpers import ROOT

PAGES = [ROOT / "docs" / "data.md", ROOT / "docs" / "replay.md"]
_FENCE = re.compile(r"^```yaml\n(.*?)^```", re.S | re.M)


def _blocks() -> list[tuple[str, str]]:
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in _FENCE.finditer(text):
            out.append((f"{page.name}:{text[:m.start()].count(chr(10)) + 1}", m.group(1)))
    return out


BLOCKS = _blocks()


def test_the_pages_have_their_snippets():
    assert len(BLOCKS) >= 7  # the three label tables, the three verdict tables, the first replay judge


@pytest.mark.parametrize(("where", "text"), BLOCKS, ids=[w for w, _ in BLOCKS])
def test_snippet_decodes_as_part_of_a_manifest(where, text):
    doc = msgspec.yaml.decode(text.encode())
    body = {"name": "docs", "judges": [{"name": "s", "backend": "simulated"}], **doc}
    decode(body)  # the manifest's own decoding: raises, naming the field, on anything the types refuse


def test_the_mt_bench_snippet_reads_the_published_shape():
    (text,) = [t for w, t in BLOCKS if w.startswith("data.md") and "human_judgments.json" in t]
    fixture = str(ROOT / "tests" / "fixtures" / "mt_bench_human")
    doc = msgspec.yaml.decode(text.replace("data/mt_bench", fixture).encode())
    source = msgspec.convert(doc["corpus"]["sources"][0], LabelledPairsSource)
    labelled.check(source, "corpus.sources[0]")
    assert sum(1 for _ in labelled.read_pairs(source)) > 0


def test_a_wrong_field_in_a_snippet_would_fail():
    with pytest.raises(msgspec.ValidationError, match="colums"):
        decode({"name": "d", "judges": [], "corpus": {"sources": [{"kind": "labelled_pairs", "colums": {}}]}})
    with pytest.raises(ManifestError, match="decison"):
        decode({"name": "d", "judges": [{"name": "r", "backend": "replay", "replay": {"path": "x", "decison": 1}}]})


def test_pages_exist():
    assert all(Path(p).is_file() for p in PAGES)

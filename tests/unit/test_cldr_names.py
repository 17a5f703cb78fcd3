"""The package's table of CLDR names (``core.cldr_names``) against what langcodes and
language-data compute: every English name and every gazetteer it holds, and the readers'
fall-back where the installed packages are not those the table was computed from."""

from __future__ import annotations

import langcodes
import pytest

from babelrun.core import cldr_names, languages
from babelrun.corpus import cldr_table
from babelrun.perturb import script


@pytest.fixture(scope="module")
def table():
    kept = cldr_names._table()
    if kept is None:
        pytest.skip("the installed langcodes / language-data are not those cldr_names.msgpack was computed "
                    "from: `python -m babelrun.corpus.cldr_table` writes it again")
    return kept


def test_every_english_name_is_langcodes_display_name(table):
    assert len(table.english) > 8000
    wrong = {tag: name for tag, name in table.english.items() if langcodes.Language.get(tag).display_name() != name}
    assert wrong == {}


def test_every_gazetteer_is_the_computed_one(table):
    assert set(table.gazetteers) >= {languages.normalize(code) for code in ("en", "de", "hi", "zh", "ja", "sw")}
    for tag in table.gazetteers:
        assert cldr_names.gazetteer(tag) == script.computed_gazetteer(tag), tag


def test_the_table_covers_the_tags_it_is_built_for(table):
    english, gazetteers = cldr_table.tags()
    assert set(gazetteers) == set(table.gazetteers)
    assert set(table.english) <= set(english)


def test_a_table_from_other_packages_is_not_believed(monkeypatch):
    cldr_names._table.cache_clear()
    monkeypatch.setattr(cldr_names, "fingerprint", lambda: "another install")
    try:
        assert cldr_names._table() is None
        assert cldr_names.english("hi") is None and cldr_names.gazetteer("hi") is None
        assert languages.name("hi") == "Hindi"  # computed from language-data instead
        script._place_and_language_names.cache_clear()
        assert script._place_and_language_names("de") == script.computed_gazetteer("de")
    finally:
        cldr_names._table.cache_clear()
        script._place_and_language_names.cache_clear()


def test_a_damaged_table_is_not_believed(monkeypatch, tmp_path):
    bad = tmp_path / "cldr_names.msgpack"
    bad.write_bytes(b"\x93not a table")
    cldr_names._table.cache_clear()
    monkeypatch.setattr(cldr_names, "TABLE", bad)
    try:
        assert cldr_names._table() is None
    finally:
        cldr_names._table.cache_clear()

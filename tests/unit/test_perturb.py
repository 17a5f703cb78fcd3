import random

import pytest

from babelrun.core.items import build
from babelrun.corpus import Reference
from babelrun.perturb import TEXT_PERTURBATIONS, perturb_reference, script
from babelrun.perturb.text import drop_entities, number_corrupt, repeat_pad, shuffle, truncate


def rng(n=0):
    return random.Random(n)


@pytest.mark.parametrize(("text", "expected"), [
    ("One. Two! Three? Four.", ["One.", "Two!", "Three?", "Four."]),
    ("It is 3.5 km, e.g. far. Next one.", ["It is 3.5 km, e.g. far.", "Next one."]),
    ("北京是首都。人口2100万！对吗？对", ["北京是首都。", "人口2100万！", "对吗？", "对"]),
    ("東京は日本の首都です。人口は約1400万人です。", ["東京は日本の首都です。", "人口は約1400万人です。"]),
    ("भारत बड़ा है। क्या यह सच है? हाँ॥", ["भारत बड़ा है।", "क्या यह सच है?", "हाँ॥"]),
    ("القاهرة كبيرة. هل هي قديمة؟ نعم.", ["القاهرة كبيرة.", "هل هي قديمة؟", "نعم."]),
    ("«Il a dit oui.» Puis il est parti.", ["«Il a dit oui.»", "Puis il est parti."]),
])
def test_sentences_in_many_scripts(text, expected):
    parts = script.sentences(text)
    assert [p.text for p in parts] == expected
    assert script.join(parts) == text


def test_truncate_drops_trailing_fraction():
    text = "S1 one. S2 two. S3 three. S4 four. S5 five."
    assert truncate(text, 0.3, rng(), "en") == "S1 one. S2 two. S3 three."  # 1.5 rounds up to 2
    assert truncate(text, 0.6, rng(), "en") == "S1 one. S2 two."  # drop 3
    assert truncate(text, 0.1, rng(), "en") == "S1 one. S2 two. S3 three. S4 four."  # at least 1
    assert truncate("Only one.", 0.6, rng(), "en") == "Only one."


def test_shuffle_keeps_sentences_changes_order():
    text = "北京是首都。上海很大。广州在南方。深圳很新。"
    out = shuffle(text, 0.3, rng(3), "zh")
    assert out != text
    assert sorted(p.text for p in script.sentences(out)) == sorted(p.text for p in script.sentences(text))
    assert " " not in out  # CJK stays without spaces


@pytest.mark.parametrize(("text", "lang", "digits"), [
    ("The tower is 330 metres tall and opened in 1889.", "en", "0123456789"),
    ("ताजमहल १६३२ में बना और इसमें २० साल लगे।", "hi", "०१२३४५६७८९"),
    ("بني البرج عام ١٨٨٩ وطوله ٣٣٠ مترا.", "ar", "٠١٢٣٤٥٦٧٨٩"),
    ("পদ্মা নদী ২৪০০ কিলোমিটার দীর্ঘ।", "bn", "০১২৩৪৫৬৭৮৯"),
])
def test_number_corrupt_changes_numbers_in_their_own_digit_system(text, lang, digits):
    for seed in range(20):
        out = number_corrupt(text, 0.6, rng(seed), lang)
        assert out != text
        before = [m.group() for m in script.NUMBER.finditer(text)]
        after = [m.group() for m in script.NUMBER.finditer(out)]
        assert len(before) == len(after)
        changed = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
        assert changed
        for _, a in changed:
            assert all(ch in digits for ch in a)
        # The words around the numbers are untouched.
        assert script.NUMBER.sub("#", out) == script.NUMBER.sub("#", text)


def test_drop_entities_cased_and_caseless():
    en = "Marie Curie won the Nobel Prize in 1903. She worked in Paris."
    out = drop_entities(en, 0.6, rng(1), "en")
    assert len(out) < len(en) and "  " not in out
    spans = script.entity_spans(en, "en")
    assert [en[a:b] for a, b in spans] == ["Marie Curie", "Nobel Prize", "Paris"]
    ja = "アインシュタインはドイツで生まれた。"
    assert [ja[a:b] for a, b in script.entity_spans(ja, "ja")] == ["アインシュタイン", "ドイツ"]
    hi = "भारत की राजधानी नई दिल्ली है।"
    assert "भारत" not in drop_entities(hi, 0.3, rng(), "hi")


def test_repeat_pad_makes_longer_with_repeated_sentences():
    text = "A one. B two. C three. D four."
    out = repeat_pad(text, 0.3, rng(), "en")
    parts = [p.text for p in script.sentences(out)]
    assert out.startswith(text)
    assert len(parts) == 4 + 4  # ceil(4 * 0.8) = 4 more
    assert set(parts) <= {"A one.", "B two.", "C three.", "D four."}
    zh = "一。二。"
    assert repeat_pad(zh, 0.6, rng(), "zh").startswith("一。二。") and " " not in repeat_pad(zh, 0.6, rng(), "zh")


def test_no_op_guard_skips_and_counts():
    refs = [
        Reference("en", "one", "Q?", "A single sentence with 42 and Paris in it."),
        Reference("en", "two", "Q?", "First sentence here. Second one with 7 apples."),
    ]
    items, audit = build(refs, [("truncate", [0.3, 0.6]), ("shuffle", [0.3])], 0, perturb_reference)
    rows = {(a.perturbation, a.severity): (a.emitted, a.skipped, a.merged) for a in audit}
    assert rows[("truncate", 0.3)] == (1, 1, 0)
    # Two sentences: truncate at 0.6 drops one of two, as 0.3 does: the same text, merged
    # into the 0.3 item (one item, one call), and counted.
    assert rows[("truncate", 0.6)] == (0, 1, 1)
    assert rows[("shuffle", 0.3)] == (1, 1, 0)
    assert {i.ref_id for i in items} == {"two"}
    assert all(i.perturbed != i.reference for i in items)


def test_identical_severities_are_one_item():
    # The lower severity keeps the item whatever order the manifest lists them in; a text
    # with enough sentences keeps both severities (they differ).
    two = Reference("en", "two", "Q?", "First sentence here. Second one with 7 apples.")
    six = Reference("en", "six", "Q?", "One. Two. Three. Four. Five. Six.")
    for severities in ([0.3, 0.6], [0.6, 0.3]):
        items, audit = build([two, six], [("truncate", severities), ("shuffle", severities)], 0, perturb_reference)
        kept = sorted((i.ref_id, i.perturbation, i.severity) for i in items)
        assert ("two", "truncate", 0.3) in kept and ("two", "truncate", 0.6) not in kept
        assert ("six", "truncate", 0.3) in kept and ("six", "truncate", 0.6) in kept
        texts = [(i.ref_id, i.perturbation, i.perturbed) for i in items]
        assert len(set(texts)) == len(texts)  # never the same text twice
        # truncate and shuffle of "two" at 0.6: both the 0.3 text (drop one of two; swap the two)
        assert {(a.perturbation, a.severity): a.merged for a in audit if a.merged} == {
            ("truncate", max(severities)): 1, ("shuffle", max(severities)): 1}
        assert sum(a.emitted + a.skipped + a.merged for a in audit) == 2 * 2 * 2


def test_items_are_reproducible_and_ids_stable():
    refs = [Reference("fr", "x", "Q?", "Paris compte 2 millions d'habitants. Lyon en a 500 000. Marseille aussi.")]
    a, _ = build(refs, [(n, [0.3, 0.6]) for n in TEXT_PERTURBATIONS], 5, perturb_reference)
    b, _ = build(refs, [(n, [0.3, 0.6]) for n in TEXT_PERTURBATIONS], 5, perturb_reference)
    c, _ = build(refs, [(n, [0.3, 0.6]) for n in TEXT_PERTURBATIONS], 6, perturb_reference)
    assert a == b
    assert {i.item_id for i in a}.isdisjoint({i.item_id for i in c})


def test_bundled_corpus_meets_its_promise():
    from babelrun.corpus import bundled

    refs = list(bundled.read(None))
    by_lang = {}
    for r in refs:
        by_lang.setdefault(r.lang, []).append(r)
    assert {"en", "hi", "ar", "sw", "zh", "ja", "es", "tr", "ru", "bn", "fr", "yo"} <= set(by_lang)
    for lang, rs in by_lang.items():
        assert len(rs) >= 10, lang
        for r in rs:
            n = len(script.sentences(r.response))
            assert 3 <= n <= 6, (r.ref_id, n)
            assert len(script.NUMBER.findall(r.response)) >= 2, r.ref_id
    # Native digit systems are represented, so number_corrupt is exercised on them.
    assert any(any("০" <= ch <= "৯" for ch in r.response) for r in by_lang["bn"])
    assert any(any("٠" <= ch <= "٩" for ch in r.response) for r in by_lang["ar"])
    assert any(any("०" <= ch <= "९" for ch in r.response) for r in by_lang["hi"])


def test_combining_marks_stay_with_their_letters():
    import unicodedata

    yo = "Nàìjíríà gba òmìnira lọ́wọ́ ìjọba Gẹ̀ẹ́sì ní ọdún 1960. Abubakar Tafawa Balewa ni Olórí."
    assert "Gẹ̀ẹ́sì" in [yo[a:b] for a, b in script.entity_spans(yo, "yo")]
    for seed in range(10):
        out = drop_entities(yo, 0.6, rng(seed), "yo")
        for word in out.split():
            assert not unicodedata.category(word[0]).startswith("M"), out
    # A name takes its whole word, suffix and vowel signs included: never half a letter.
    hi = "भारतीय रेल बड़ी है। भारत में २ करोड़ लोग।"
    assert [hi[a:b] for a, b in script.entity_spans(hi, "hi")] == ["भारतीय", "भारत"]
    bn = "ভারতের রাজধানী দিল্লি।"
    assert [bn[a:b] for a, b in script.entity_spans(bn, "bn")] == ["ভারতের"]


def test_rtl_text_survives_every_perturbation():
    ar = "تقع القاهرة في مصر ويبلغ عدد سكانها ٢٢ مليون نسمة. بني الهرم الأكبر قبل ٤٥٠٠ سنة. هل زرته؟"
    for name, fn in TEXT_PERTURBATIONS.items():
        out = fn(ar, 0.6, rng(2), "ar")
        assert out != ar, name
        assert "\u202e" not in out and "\u200f" not in out  # no direction controls invented

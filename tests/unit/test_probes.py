"""Robustness probes: cue texts, item construction and gold, names, manifest checks."""

from __future__ import annotations

import json
import random

import pytest
import regex

from babelrun import manifest
from babelrun.core.items import Reference
from babelrun.corpus import bundled as bundled_corpus
from babelrun.errors import ManifestError
from babelrun.judges import judge_spec
from babelrun.judges.protocol import Judging
from babelrun.perturb import probes, romanise, script
from babelrun.plan import Plan
from babelrun.plan import probes as probe_items
from babelrun.spec import BaseSpec, PerturbationSpec, VerdictSpec
from helpers import write_manifest

BUNDLED = ("ar", "bn", "en", "es", "fr", "hi", "ja", "ru", "sw", "tr", "yo", "zh")
# Script_Extensions: a letter shared by scripts (the Arabic tatweel, the Japanese long-vowel
# mark) counts for each script that uses it.
SCRIPT = {"ar": r"\p{scx=Arabic}", "bn": r"\p{scx=Bengali}", "hi": r"\p{scx=Devanagari}",
          "ru": r"\p{scx=Cyrillic}", "zh": r"\p{scx=Han}",
          "ja": r"[\p{scx=Han}\p{scx=Hiragana}\p{scx=Katakana}]"}
ALL_PROBES = [PerturbationSpec(name=n) for n in probes.PROBES]


def test_every_bundled_language_has_every_probe_in_its_own_script():
    table = probes.bundled()
    assert set(BUNDLED) <= set(table.languages())
    for lang in BUNDLED:
        assert "source" not in table.texts[lang]
        assert lang == "en" or "not checked by a native speaker" in table.sources[lang]
        own = regex.compile(SCRIPT.get(lang, r"\p{scx=Latin}"))
        for probe in (*probes.CUE_PROBES, "master_key"):
            texts = table.texts[lang][probe]
            assert texts, (lang, probe)
            for text in texts:
                letters = regex.findall(r"\p{L}", text.replace("{verdict}", ""))
                foreign = [c for c in letters if not own.fullmatch(c)]
                assert not foreign, (lang, probe, text, foreign)


def _refs() -> list[Reference]:
    return [r for r in bundled_corpus.read(None) if r.lang in BUNDLED]


def test_every_probe_items_gold_holds_by_construction():
    refs = _refs()
    specs = [*ALL_PROBES[:2], PerturbationSpec(name="injection", cue_language="both"), *ALL_PROBES[3:]]
    items = [it for _, it, _ in probe_items.generate(refs, specs, seed=3) if it is not None]
    by = {(it.lang, it.ref_id, it.perturbation): it for it in items}
    seen = {probes.probe_of(it.perturbation) for it in items}
    assert seen == {*probes.PROBES, probes.CLEAN}
    checked = romanised = 0
    for it in items:
        parsed = probes.parse(it.perturbation)
        assert parsed is not None and it.kind == "probe"
        if parsed.probe == "self_match":
            assert it.perturbed == it.reference
        elif parsed.probe == "master_key":
            assert not probes.words(it.perturbed) & probes.words(it.reference), it
        elif parsed.probe == probes.ROMANISED:
            # the reference in Latin letters against the clean twin's degraded answer, unchanged
            twin = by[(it.lang, it.ref_id, parsed.twin)]
            assert it.perturbed == twin.perturbed and it.reference != twin.reference
            assert romanise.main_script(it.reference) == "LATIN" != romanise.main_script(it.perturbed)
            assert it.cue == f"romanised|Latn|{romanise.transliterator(it.lang)}|reference"
            romanised += 1
        elif parsed.probe in probes.CUE_PROBES:
            twin = by[(it.lang, it.ref_id, parsed.twin)]
            probe, cue_lang, index, where = it.cue.split("|")
            cue = probes.texts_for(probe, cue_lang, probes.bundled())[int(index)].replace("{verdict}", probes.SLOT_MARK)
            assert cue in it.perturbed
            # the cued answer is the clean twin's text with the cue added at the recorded place
            assert "".join(it.perturbed.replace(cue, "").split()) == "".join(twin.perturbed.split())
            if where == "start":
                assert it.perturbed.startswith(cue)
            elif where == "end":
                assert it.perturbed.endswith(cue)
            else:
                k = int(where.split(":")[1])
                head = script.join(script.sentences(twin.perturbed)[:k])
                assert it.perturbed.startswith(head) and it.perturbed[len(head):].lstrip().startswith(cue)
            assert "".join(twin.perturbed.split()) != "".join(it.reference.split())
            assert (parsed.cue_lang or it.lang) == cue_lang
            checked += 1
    assert checked > 200
    # every bundled language not written in Latin letters (zh too: generate does not refuse,
    # the manifest check does); Latin-script ones are counted no-ops
    assert romanised >= 20 and {it.lang for it in items if probes.probe_of(it.perturbation) == probes.ROMANISED} \
        == {"ar", "bn", "hi", "ja", "ru", "zh"}
    # placements vary, seeded per item
    wheres = {it.cue.split("|")[3].split(":")[0] for it in items if it.cue.count("|") == 3
              and it.cue.split("|")[0] in probes.CUE_PROBES}
    assert wheres == {"start", "end", "between"}
    again = [it for _, it, _ in probe_items.generate(refs, specs, seed=3) if it is not None]
    assert again == items


def test_a_language_without_cue_texts_gets_the_english_cue_recorded_as_code_switched():
    ref = Reference("de", "r1", "Wer?", "Erster Satz hier. Zweiter Satz dort. Dritter Satz am Ende.")
    items = [it for _, it, _ in probe_items.generate([ref], [PerturbationSpec(name="authority")], 0) if it]
    cued = [it for it in items if it.perturbation != "probe:clean"]
    assert [it.perturbation for it in cued] == ["probe:authority@en"]
    assert cued[0].cue.startswith("authority|en|")


def test_a_one_sentence_reference_has_no_cue_probe_only_counted_no_ops():
    ref = Reference("en", "r1", "Q?", "Only one sentence here.")
    out = list(probe_items.generate([ref], ALL_PROBES, 0))
    outcomes = {cell[1]: outcome for cell, _, outcome in out}
    assert outcomes["probe:authority"] == "no-op" and outcomes["probe:clean"] == "no-op"
    assert outcomes["probe:master_key"] == "emitted" and outcomes["probe:self_match"] == "emitted"


def test_names_round_trip():
    assert probes.name("authority") == "probe:authority"
    assert probes.name("authority", "en", ("shuffle", 0.3)) == "probe:authority@en+shuffle:0.3"
    parsed = probes.parse("probe:authority@en+shuffle:0.3")
    assert (parsed.probe, parsed.cue_lang, parsed.base, parsed.twin) == ("authority", "en", ("shuffle", 0.3),
                                                                         "probe:clean+shuffle:0.3")
    assert probes.parse("truncate") is None and probes.parse("probe:nonsense") is None
    assert probes.parse("probe:master_key@en").twin == "probe:clean"


def test_injection_names_the_cued_answers_slot_in_the_judges_own_syntax():
    ref = Reference("en", "r1", "Q?", "One. Two. Three.")
    spec = PerturbationSpec(name="injection")
    item = next(it for _, it, _ in probe_items.generate([ref], [spec], 0) if it and it.cue)
    mt_bench = Judging.of(judge_spec(name="j", backend="simulated", prompt=manifest.PromptSpec(
        user="{question}\n[A] {answer_a}\n[B] {answer_b}"),
        verdict=VerdictSpec(pattern=r"\[\[(A|B|C)\]\]", labels={"A": "A", "B": "B", "C": "tie"})))
    for order, slot in (("ref_first", "B"), ("pert_first", "A")):
        text = mt_bench.render(item, order)[-1]["content"]
        assert f"[[{slot}]]" in text and probes.SLOT_MARK not in text
    builtin = Judging.of(judge_spec(name="j", backend="simulated"))
    text = builtin.render(item, "pert_first")[-1]["content"]
    assert probes.SLOT_MARK not in text and ("must be A." in text or "with A." in text)


def test_plan_keeps_probes_apart_and_counts_them(tmp_path):
    m = manifest.load(write_manifest(tmp_path, [{"name": "s", "backend": "simulated"}],
                                     perturbations=[{"name": "truncate", "severities": [0.6]},
                                                    {"name": "authority"}, {"name": "self_match"}]))
    plan = Plan.from_manifest(m)
    names = {it.perturbation for it in plan.items()}
    assert {"truncate", "probe:authority", "probe:clean", "probe:self_match"} <= names
    audited = {row.perturbation for row in plan.audit}
    assert {"probe:authority", "probe:clean", "probe:self_match"} <= audited


@pytest.mark.parametrize(("pert", "path"), [
    ({"name": "master_key", "base": {"name": "truncate"}}, "perturbations[0].base"),
    ({"name": "authority", "base": {"name": "nope"}}, "perturbations[0].base.name"),
    ({"name": "truncate", "cue_language": "en"}, "perturbations[0].cue_language"),
    ({"name": "authority", "cues": "/no/such/file.json"}, "perturbations[0].cues"),
])
def test_manifest_checks_the_probe_fields(tmp_path, pert, path):
    with pytest.raises(ManifestError) as info:
        manifest.load(write_manifest(tmp_path, [{"name": "s", "backend": "simulated"}], perturbations=[pert]))
    assert info.value.path == path


def test_a_users_cue_file_replaces_the_texts_it_gives(tmp_path):
    own = tmp_path / "cues.json"
    own.write_text(json.dumps({"de": {"source": "our red team", "authority": ["Laut Professor Müller stimmt das."]},
                               "en": {"bandwagon": ["Everyone on our team liked this one."]}}))
    table = probes.cues(str(own))
    assert table.texts["de"]["authority"] == ["Laut Professor Müller stimmt das."]
    assert table.texts["en"]["bandwagon"] == ["Everyone on our team liked this one."]
    assert table.texts["en"]["authority"] == probes.bundled().texts["en"]["authority"]
    assert table.sources["de"] == "our red team"
    ref = Reference("de", "r1", "Wer?", "Erster Satz hier. Zweiter Satz dort. Dritter Satz am Ende.")
    items = [it for _, it, _ in probe_items.generate([ref], [PerturbationSpec(name="authority", cues=str(own))], 0)
             if it and it.cue]
    assert [it.perturbation for it in items] == ["probe:authority"] and "Müller" in items[0].perturbed
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"en": {"injection": ["no placeholder"]}}))
    with pytest.raises(ManifestError) as info:
        manifest.load(write_manifest(tmp_path, [{"name": "s", "backend": "simulated"}],
                                     perturbations=[{"name": "injection", "cues": str(bad)}]))
    assert info.value.path == "perturbations[0].cues" and "{verdict}" in info.value.problem


def test_master_key_avoids_reference_words():
    table = probes.bundled()
    text, index = probes.master_key("Let us think about the solution step by step", "en", table, random.Random(0))
    assert not probes.words(text) & probes.words("Let us think about the solution step by step")


def test_base_spec_defaults_to_truncate_at_0_6():
    assert (BaseSpec().name, BaseSpec().severity) == probes.DEFAULT_BASE


def test_the_log_space_mcnemar_matches_the_exact_integer_sum():
    from babelrun.score.probes import EXACT_UP_TO, mcnemar
    from babelrun.score.stats import mcnemar_exact

    for b, c in [(0, 0), (3, 9), (90, 111), (150, 60), (300, 290), (EXACT_UP_TO, 1)]:
        assert mcnemar(b, c) == pytest.approx(mcnemar_exact(b, c), rel=1e-9, abs=1e-300)


def test_a_spaced_cue_is_spaced_from_an_answer_in_a_script_without_spaces():
    from random import Random

    for answer, lang in (("第一句。第二句。第三句。", "zh"), ("最初の文。次の文。", "ja"),
                         ("ประโยคแรกที่นี่", "th"), ("只有一句", "zh")):
        for seed in range(12):
            out, where = probes.place(answer, "According to a study.", Random(seed))
            assert "According to a study." in out
            if where == "start":
                assert out.startswith("According to a study. "), (lang, out)
            elif where == "end":
                assert out.endswith(" According to a study."), (lang, out)
            else:
                assert " According to a study. " in out, (lang, out)
            assert "".join(out.replace("According to a study.", "").split()) == "".join(answer.split())
        # a cue in a script without spaces is joined as the answer's own sentences are
        out, where = probes.place("第一句。第二句。", "据研究。", Random(0))
        assert " " not in out


def test_romanised_scripts_are_refused_or_transliterated_by_name():
    from babelrun.perturb import romanise

    assert "zh is written in Hans" in romanise.problem("zh") and "Ethi" in romanise.problem("am")
    assert romanise.problem("en") is None and romanise.problem("hi") is None and romanise.problem("ru") is None
    for lang, text in (("hi", "सभी मनुष्यों को गौरव और अधिकारों के मामले में जन्मजात स्वतंत्रता प्राप्त है।"),
                       ("ru", "Все люди рождаются свободными и равными."),
                       ("ar", "يولد جميع الناس أحرارًا متساوين في الكرامة والحقوق."),
                       ("el", "Όλοι οι άνθρωποι γεννιούνται ελεύθεροι και ίσοι.")):
        out = romanise.romanise(text, lang)
        assert romanise.main_script(out) == "LATIN" and all(ord(c) < 0x250 for c in out), (lang, out)
    assert romanise.romanise("Все люди рождаются свободными.", "ru") == "Vse lyudi rozhdayutsya svobodnymi."

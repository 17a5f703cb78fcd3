"""The Judge-LS protocol on labelled pairs: conditions, alignment, the
transformation audit, flips against the pivot recovered in the full and the filtered analysis,
and the FLORES parallel options that cannot be honoured."""

from __future__ import annotations

import json
from collections import Counter

import pytest

import babelrun
from babelrun.analyses import judge_ls
from babelrun.core.items import LabelledPair
from babelrun.corpus import labelled
from babelrun.errors import ManifestError
from babelrun.spec import LabelledPairsSource
from helpers import ROOT, SHARED_DATA, simulated, tiny_flores, write_manifest

LLMBAR = SHARED_DATA / "llmbar"
needs_llmbar = pytest.mark.skipif(not LLMBAR.is_dir(), reason="shared LLMBar data absent")
SETS = ("LLMBar_Natural", "LLMBar_Adversarial_Neighbor", "LLMBar_Adversarial_GPTInst",
        "LLMBar_Adversarial_GPTOut", "LLMBar_Adversarial_Manual")


def test_the_bundled_variants_are_40_pairs_in_two_conditions():
    pairs = list(labelled.read_pairs(LabelledPairsSource()))
    assert len(pairs) == 80 and {p.lang for p in pairs} == {"zh"}
    by_condition = Counter(p.condition for p in pairs)
    assert by_condition == {"": 40, "zh-en-switched": 40}
    assert Counter(p.set_name for p in pairs if not p.condition) == dict.fromkeys(SETS, 8)
    assert {p.pair_id for p in pairs if p.condition} == {p.pair_id for p in pairs if not p.condition}
    assert {p.perturbation for p in pairs if p.condition} == {f"pairs:{s}@zh-en-switched" for s in SETS}
    # translated, not copied: every zh prompt holds Chinese characters
    assert all(any("\u4e00" <= ch <= "\u9fff" for ch in p.prompt) for p in pairs if not p.condition)


@needs_llmbar
def test_the_bundled_variants_keep_the_english_pairs_labels():
    english = {p.pair_id: p for s in SETS for p in labelled.read_pairs(LabelledPairsSource(path=str(LLMBAR / s)))}
    rows = json.loads(labelled.bundled_path().read_text(encoding="utf-8"))
    for row in rows:
        src = json.loads((LLMBAR / row["set"] / "dataset.json").read_text(encoding="utf-8"))
        index = int(row["id"].rsplit("-", 1)[1])
        assert src[index]["label"] == row["label"], row["id"]
        assert row["id"] in english


def test_a_condition_column_and_one_file_per_condition_read_the_same(tmp_path):
    rows = [{"id": f"q{i}", "input": f"question {i}", "output_1": "good", "output_2": "bad", "label": 1}
            for i in range(3)]
    one = tmp_path / "one.json"
    one.write_text(json.dumps([{**r, "condition": c} for c in ("en", "zh-en-switched") for r in rows]))
    (tmp_path / "en.json").write_text(json.dumps(rows))
    (tmp_path / "mix.json").write_text(json.dumps(rows))
    from_column = list(labelled.read_pairs(LabelledPairsSource(path=str(one))))
    from_files = [*labelled.read_pairs(LabelledPairsSource(path=str(tmp_path / "en.json"))),
                  *labelled.read_pairs(LabelledPairsSource(path=str(tmp_path / "mix.json"),
                                                           condition="zh-en-switched"))]

    def key(p):
        return (p.pair_id, p.lang, p.condition)

    assert sorted(map(key, from_column)) == sorted(map(key, from_files))
    assert {key(p) for p in from_column} == {(f"q{i}", lang, c) for i in range(3)
                                              for lang, c in (("en", ""), ("zh", "zh-en-switched"))}


def test_a_condition_that_names_no_language_is_refused(tmp_path):
    (tmp_path / "p.json").write_text(json.dumps([{"input": "q", "output_1": "a", "output_2": "b", "label": 1,
                                                  "condition": "klingon-switched"}]))
    path = write_manifest(tmp_path, [simulated()], corpus={"sources": [{"kind": "labelled_pairs", "path": "p.json"}]})
    with pytest.raises(ManifestError) as e:
        babelrun.load_manifest(path)
    assert e.value.path == "corpus.sources[0].path" and "not a language code" in str(e.value)


def _pair(cond, prompt, better, worse="worse answer", pid="p1"):
    lang, mix = labelled.condition(cond)
    return LabelledPair(lang, pid, "S", prompt, better, worse, condition=mix)


def test_the_transformation_audit_flags_empty_fields_shrinkage_and_numbers():
    base = "Add 12 and 30, then divide the sum by 7 and report it."
    rules = judge_ls.AuditRules(min_length_ratio=0.15, min_chars=20, max_number_change=1)
    pairs = [_pair("en", base, "The sum is 42 and 42 / 7 = 6, so the answer is 6."),
             _pair("zh", "把 12 和 30 相加，再除以 7。", "和是 42，42 / 7 = 6。"),  # fine
             _pair("zh-en-switched", "", "和是 42。"),  # empty prompt; a shrunk, number-losing answer
             _pair("fr", base, "Quarante-deux, puis six.")]  # the numbers became words
    flags = judge_ls.audit(pairs, "en", rules)
    got = {(f.condition, f.field, f.rule) for f in flags}
    assert got == {("zh-en-switched", "prompt", "empty"), ("zh-en-switched", "prompt", "numbers"),
                   ("zh-en-switched", "better", "shrinkage"), ("zh-en-switched", "better", "numbers"),
                   ("fr", "better", "numbers")}


def test_flores_parallel_options_that_cannot_be_honoured_are_errors(tmp_path):
    source = tiny_flores(tmp_path)
    # English is FLORES's pivot file: the prompts' language, with no references of its own
    path = write_manifest(tmp_path, [simulated()], corpus={
        "sources": [source], "parallel": {"pivot": "en", "code_switched": True, "tie_probes": True}})
    with pytest.raises(ManifestError) as e:
        babelrun.load_manifest(path)
    assert e.value.path == "corpus.parallel.pivot" and "FLORES" in str(e.value)
    # one language only: nothing to code-switch with
    path = write_manifest(tmp_path, [simulated()], corpus={
        "sources": [source], "languages": ["es"], "parallel": {"pivot": "es", "code_switched": True}})
    with pytest.raises(ManifestError) as e:
        babelrun.load_manifest(path)
    assert e.value.path == "corpus.parallel.code_switched"
    path = write_manifest(tmp_path, [simulated()], corpus={
        "sources": [source], "languages": ["es"], "parallel": {"pivot": "es", "tie_probes": True}})
    with pytest.raises(ManifestError) as e:
        babelrun.load_manifest(path)
    assert e.value.path == "corpus.parallel.tie_probes"


@pytest.mark.skipif(not (ROOT.parent / "shared" / "data" / "llmbar").is_dir(),
                    reason="the example reads ../../shared/data from the repository's examples/")
def test_the_judge_ls_example_is_a_valid_manifest():
    manifest = babelrun.load_manifest(ROOT / "examples" / "judge-ls.yaml")
    assert manifest.corpus.parallel.tie_probes and len(manifest.corpus.sources) == 6

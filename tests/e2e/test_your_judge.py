"""Auditing the user's own judge: their template, verdict pattern, protocol and client."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from babelrun import judges, manifest
from babelrun.core.items import Item
from babelrun.errors import ManifestError
from babelrun.judges import judge_spec
from babelrun.judges.protocol import Judging, reply_format, score_reader, slot_reader
from babelrun.spec import VerdictSpec
from babelrun.store import compact
from babelrun.store.done import DoneSet
from babelrun.store.log import read_table
from babelrun.testing import FakeJudgeServer
from helpers import ROOT, SHARED_DATA, files_bytes, kill_after_records, quiet_audit, write_manifest

MT_BENCH = SHARED_DATA / "judge-prompts" / "mt-bench-judge_prompts.jsonl"
needs_mt_bench = pytest.mark.skipif(not MT_BENCH.is_file(), reason="shared MT-Bench judge prompts absent")
PAIR_VERDICT = {"pattern": r"\[\[([ABC])\]\]", "labels": {"A": "A", "B": "B", "C": "tie"}}


def _between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def _cards(run_dir: Path) -> dict:
    return json.loads((run_dir / "cards.json").read_bytes())


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for p in sorted((run_dir / "log").glob("*.jsonl")) for line in p.read_text().splitlines()]


# ---- reading verdicts ------------------------------------------------------------------------


def test_declared_pattern_reads_what_the_strict_parser_refuses():
    strict = slot_reader(None)
    mt = slot_reader(VerdictSpec(**PAIR_VERDICT))
    for reply, slot in [("[[A]]", "A"), ("[[C]]", "tie"), ("After comparing both, [[B]]", "B"),
                        ('The format is "[[A]]", "[[B]]" or "[[C]]". Mine: [[B]]', "B"),  # last match
                        ("no verdict here", "invalid"), ("[[D]]", "invalid")]:
        assert mt(reply) == slot, reply
    assert [strict(r) for r in ("[[C]]", "After comparing both, [[B]]", "m")] == ["invalid"] * 3
    # alpaca_eval's m / M: the map says which slot each names; case matters.
    alpaca = slot_reader(VerdictSpec(pattern=r"^\s*([mM])\b", match="first", labels={"m": "A", "M": "B"}))
    assert (alpaca("m"), alpaca("M"), alpaca("x")) == ("A", "B", "invalid")
    first = slot_reader(VerdictSpec(pattern=r"^\s*(A|B)\b", match="first"))
    assert first("B\n\nExplanation: A is shorter.") == "B"
    output = slot_reader(VerdictSpec(pattern=r"Output \(([ab])\)", labels={"a": "A", "b": "B"}))
    assert output("Output (a)") == "A"


def test_pointwise_scores_must_be_numbers_inside_the_scale():
    read = score_reader(VerdictSpec(pattern=r"Rating: \[\[([^\]]*)\]\]", scale=(1, 10)))
    assert read("Good. Rating: [[7]]") == 7.0
    assert read("Rating: [[2]] at first, then Rating: [[8.5]]") == 8.5
    for bad in ("Rating: [[11]]", "Rating: [[0]]", "Rating: [[seven]]", "Rating: [[nan]]", "Rating: [[inf]]",
                "Rating: [[1_0]]", "Rating: [[1e1]]", "7"):
        assert read(bad) is None, bad


def test_the_simulated_judge_writes_the_format_its_pattern_reads():
    assert reply_format(VerdictSpec(**PAIR_VERDICT)) == "[[{label}]]"
    assert reply_format(VerdictSpec(pattern=r"Rating: \[\[(\d+)\]\]", scale=(1, 10))) == "Rating: [[{label}]]"
    assert reply_format(VerdictSpec(pattern=r"(A|B)+ or .*", labels={})) is None  # not plain text around it


# ---- templates -------------------------------------------------------------------------------


def _item(**fields) -> Item:
    base = dict(item_id="0" * 20, kind="text", lang="sw", ref_id="r", prompt="Q?", reference="REF", perturbed="PERT",
                perturbation="truncate", severity=0.3, ref_len=3, pert_len=4)
    return Item(**{**base, **fields})


def test_templates_render_both_protocols_and_never_hand_over_the_gold():
    pair = Judging.of(judge_spec(name="j", backend="simulated", prompt=manifest.PromptSpec(
        system="sys {language}", user="{question}|{answer_a}|{answer_b}|{ref_answer_1}")))
    messages = pair.request(_item(reference_answer="GUIDE"), "pert_first").messages
    assert messages == [{"role": "system", "content": "sys Swahili"},
                        {"role": "user", "content": "Q?|PERT|REF|GUIDE"}]
    point = Judging.of(judge_spec(name="j", backend="simulated", protocol="pointwise",
                                 prompt=manifest.PromptSpec(user="{question} {answer}")))
    assert point.keys == ("reference", "degraded")
    assert point.request(_item(), "degraded").messages[-1]["content"] == "Q? PERT"
    with pytest.raises(ValueError, match="reference_answer"):  # never the answer under judgement
        pair.request(_item(), "ref_first")


def test_judge_id_hashes_the_template_text_not_its_path(tmp_path):
    (tmp_path / "a").mkdir()
    text = "Q {question}\nA {answer_a}\nB {answer_b}\nReply A or B."
    for folder in ("a", "."):
        (tmp_path / folder / "t.txt").write_text(text)
    ids = []
    for path in ("t.txt", "a/t.txt"):
        m = manifest.load(write_manifest(tmp_path, [{"name": "j", "backend": "simulated", "prompt": path}]))
        ids.append(judges.judge_id(m.judges[0]))
    (tmp_path / "t.txt").write_text(text + " ")
    m = manifest.load(write_manifest(tmp_path, [{"name": "j", "backend": "simulated", "prompt": "t.txt"}]))
    assert ids[0] == ids[1] != judges.judge_id(m.judges[0])
    builtin = manifest.load(write_manifest(tmp_path, [{"name": "j", "backend": "simulated"}])).judges[0]
    patterned = msgspec.structs.replace(builtin, verdict=VerdictSpec(**PAIR_VERDICT))
    assert len({judges.judge_id(builtin), judges.judge_id(patterned),
                judges.judge_id(msgspec.structs.replace(builtin, protocol="pointwise", prompt="pointwise"))}) == 3


def test_pointwise_keys_share_the_pairwise_key_bit():
    done = DoneSet.of([("j", "ab" * 10, "degraded"), ("j", "cd" * 10, "reference")])
    assert ("j", "ab" * 10, "pert_first") in done and ("j", "cd" * 10, "ref_first") in done
    assert ("j", "ab" * 10, "reference") not in done


# ---- manifest errors ---------------------------------------------------------------------------


BAD = [
    ({"prompt": {"user": "{question} {answer_a}"}}, "judges[0].prompt", "answer_b"),
    ({"prompt": {"user": "{answer_a} {answer_b} {foo}"}}, "judges[0].prompt", "{foo}"),
    ({"prompt": {"user": "{answer_a.__class__} {answer_b}"}}, "judges[0].prompt", "plain name"),
    ({"prompt": "no-such-template"}, "judges[0].prompt", "neither a built-in"),
    ({"verdict": {"pattern": r"\[\[A\]\]"}}, "judges[0].verdict.pattern", "group"),
    ({"verdict": {"pattern": r"\[\[(A"}}, "judges[0].verdict.pattern", "regular expression"),
    ({"verdict": {"pattern": "(x)", "labels": {"x": "A"}}}, "judges[0].verdict.labels", "B"),
    ({"verdict": {"pattern": "(x)", "scale": [1, 10]}}, "judges[0].verdict.scale", "pointwise"),
    ({"protocol": "pointwise"}, "judges[0].prompt", "{answer}"),
    ({"protocol": "pointwise", "prompt": "pointwise", "verdict": {"pattern": r"(\d)"}},
     "judges[0].verdict.scale", "scale"),
    ({"protocol": "pointwise", "prompt": "pointwise", "verdict": {"pattern": r"(\d)", "scale": [5, 1]}},
     "judges[0].verdict.scale", "lo < hi"),
    ({"protocol": "sideways"}, "judges[0].protocol", ""),
    ({"protocol": "pointwise", "prompt": "pointwise", "soft": True}, "judges[0].soft", "pairwise only"),
    ({"prompt": {"user": "{answer_a} {answer_b} {reference}"}}, "judges[0].prompt", "reference_answer"),
    ({"callable": "m:f"}, "judges[0].callable", "does not apply"),
    ({"azure": {"deployment": "d"}}, "judges[0].azure", "does not apply"),
    ({"verdict": {"pattern": r"(A|B)+ or .*"}}, "judges[0].verdict.reply", "simulated"),
    ({"prompt": {"file": "collection.jsonl", "name": "single"}}, "judges[0].protocol", "pointwise"),
    ({"prompt": {"file": "collection.jsonl", "name": "nope"}}, "judges[0].prompt.name", "no template"),
]


@pytest.mark.parametrize(("fields", "path", "words"), BAD, ids=[f"{b[1]}-{i}" for i, b in enumerate(BAD)])
def test_manifest_errors_name_the_judge_field(tmp_path, fields, path, words):
    (tmp_path / "collection.jsonl").write_text(
        json.dumps({"name": "single", "type": "single", "system_prompt": "", "prompt_template": "{answer}"}) + "\n")
    m = write_manifest(tmp_path, [{"name": "mine", "backend": "simulated", **fields}])
    with pytest.raises(ManifestError) as info:
        manifest.load(m)
    assert info.value.path == path and words in info.value.problem


def test_python_backend_needs_a_callable_and_the_cli_exits_2_on_one_line(tmp_path):
    m = write_manifest(tmp_path, [{"name": "code", "backend": "python"}])
    done = subprocess.run([sys.executable, "-m", "babelrun", "validate", str(m)], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "judges[0].callable" in done.stderr


# ---- MT-Bench through a loopback OpenAI-compatible server --------------------------------------


def _longer_wins(prompt: str) -> str:
    """MT-Bench pair-v2 replies: an explanation, then the longer answer ([[C]] when equal);
    an answer A of a length divisible by 9 gets a reply without the verdict format."""
    a = _between(prompt, "[The Start of Assistant A's Answer]\n", "\n[The End of Assistant A's Answer]")
    b = _between(prompt, "[The Start of Assistant B's Answer]\n", "\n[The End of Assistant B's Answer]")
    if len(a) % 9 == 0:
        return "Both answers are reasonable; I would not pick one."
    verdict = "[[C]]" if len(a) == len(b) else "[[A]]" if len(a) > len(b) else "[[B]]"
    return f'The format asks for "[[A]]", "[[B]]" or "[[C]]". Assistant A is {len(a)} characters long. {verdict}'


@needs_mt_bench
def test_mt_bench_pair_v2_judge_shows_its_rule(tmp_path, small_corpus):
    with FakeJudgeServer(reply=_longer_wins) as server:
        m = write_manifest(tmp_path, [{
            "name": "mt-bench", "backend": "openai", "model": "gpt-x", "endpoint": server.url,
            "prompt": {"file": str(MT_BENCH), "name": "pair-v2"}, "verdict": PAIR_VERDICT}], corpus=small_corpus)
        quiet_audit(m)
        body = server.last_body
    assert body["max_tokens"] == 1024 and body["messages"][0]["content"].startswith("Please act as an impartial")
    assert "[The Start of Assistant A's Answer]" in body["messages"][1]["content"]
    overall = _cards(tmp_path / "run")["judges"][0]["overall"]
    assert overall["verbosity"]["value"] == 1.0  # always the longer answer
    records = _records(tmp_path / "run")
    for r in records:
        if r["raw"].endswith("[[C]]"):
            assert r["slot"] == "tie"
        elif "[[" not in r["raw"]:
            assert r["slot"] == "invalid" and r["verdict"] == "invalid"
        else:
            assert r["slot"] == r["raw"][-3]
    kinds = {r["slot"] for r in records}
    assert {"A", "B", "tie", "invalid"} <= kinds
    ties = sum(r["slot"] == "tie" for r in records)
    assert overall["tie_rate"]["value"] == pytest.approx(ties / len(records), abs=1e-4)


def _by_length(answer: str) -> int:
    return max(1, min(10, round(2 + 2 * math.log2(max(1, len(answer)) / 100))))


@needs_mt_bench
def test_mt_bench_single_v1_pointwise_recovers_the_length_rule(tmp_path, small_corpus):
    def rate(prompt: str) -> str:
        answer = _between(prompt, "[The Start of Assistant's Answer]\n", "\n[The End of Assistant's Answer]")
        return f"The answer is {len(answer)} characters long. Rating: [[{_by_length(answer)}]]"

    with FakeJudgeServer(reply=rate) as server:
        m = write_manifest(tmp_path, [{
            "name": "single", "backend": "openai", "model": "gpt-x", "endpoint": server.url, "protocol": "pointwise",
            "prompt": {"file": str(MT_BENCH), "name": "single-v1"}}], corpus=small_corpus)
        quiet_audit(m)
    records = [r for r in _records(tmp_path / "run") if r["perturbation"] == "repeat_pad"]
    by_item: dict[str, dict] = {}
    for r in records:
        by_item.setdefault(r["item_id"], {})[r["order"]] = r
    expected = [_by_length("x" * r["degraded"]["pert_len"]) - _by_length("x" * r["reference"]["ref_len"])
                for r in by_item.values()]
    card = _cards(tmp_path / "run")["pointwise"][0]["overall"]
    assert card["verbosity_gain"]["value"] == pytest.approx(sum(expected) / len(expected), abs=1e-4)
    assert card["verbosity_gain"]["value"] > 0 and card["invalid_rate"]["value"] == 0
    assert all(r["score"] == float(re.search(r"\[\[(\d+)\]\]", r["raw"]).group(1)) for r in records)


# ---- the simulated judge, pointwise: known truths ------------------------------------------------


def test_simulated_pointwise_scale_offset_is_recovered(tmp_path):
    corpus = {"sources": [{"kind": "bundled"}], "languages": ["en", "hi", "zh", "sw"], "references_per_language": 10}
    m = write_manifest(tmp_path, [{
        "name": "rater", "backend": "simulated", "protocol": "pointwise", "prompt": "pointwise",
        "simulated": {"scale_offset": {"hi": 1.0}, "score_noise": 0.7, "invalid_rate": 0.05}}],
        corpus=corpus, scoring={"bootstrap": 400})
    quiet_audit(m)
    card = _cards(tmp_path / "run")["pointwise"][0]
    offsets = {lc["lang"]: lc["scale_offset"] for lc in card["languages"]}
    shares = {lc["lang"]: lc["scale_offset"]["n"] for lc in card["languages"]}
    truth = 1.0 - shares["hi"] / sum(shares.values())  # +1.0 minus hi's part of the pooled mean
    assert offsets["hi"]["lo"] <= truth <= offsets["hi"]["hi"]
    others = [offsets[c]["value"] for c in ("en", "zh", "sw")]
    assert offsets["hi"]["value"] - sum(others) / 3 == pytest.approx(1.0, abs=0.25)
    assert card["overall"]["invalid_rate"]["lo"] <= 0.05 <= card["overall"]["invalid_rate"]["hi"]
    assert card["overall"]["discrimination"]["value"] > 0.6  # the degraded answer scores 2 lower


def test_pointwise_and_pairwise_judges_sit_side_by_side_and_resume(tmp_path, small_corpus):
    judges_ = [{"name": "pair", "backend": "simulated", "verdict": PAIR_VERDICT,
                "prompt": {"user": "{question}\n[A] {answer_a}\n[B] {answer_b}\nExplain, then [[A]], [[B]] or [[C]]."},
                "simulated": {"position_bias": 0.3}},
               {"name": "point", "backend": "simulated", "protocol": "pointwise", "prompt": "pointwise"}]
    m = write_manifest(tmp_path, judges_, corpus=small_corpus)
    first = quiet_audit(m)
    lines = sum(1 for _ in _records(tmp_path / "run"))
    second = quiet_audit(m)  # resumes: nothing left to call
    assert sum(1 for _ in _records(tmp_path / "run")) == lines
    assert first.cards.judges[0].judge == "pair" and first.cards.pointwise[0].judge == "point"
    assert second.cards.pointwise[0].overall.items == first.cards.pointwise[0].overall.items
    report = (tmp_path / "run" / "report.md").read_text()
    assert "## Pointwise judges" in report and "side by side" in report
    assert "Pointwise judges" in (tmp_path / "run" / "report.html").read_text()
    raws = [r["raw"] for r in _records(tmp_path / "run") if r["judge"] == "pair"]
    assert all(re.search(r"\[\[[ABC]\]\]$", raw) for raw in raws if "[[" in raw)


def test_diff_of_two_pointwise_runs_shows_the_scale_drift(tmp_path, small_corpus):
    runs = []
    for offset in (0.0, 2.0):
        folder = tmp_path / f"o{offset}"
        folder.mkdir()
        m = write_manifest(folder, [{"name": "point", "backend": "simulated", "protocol": "pointwise",
                                     "prompt": "pointwise", "simulated": {"scale_offset": {"zh": offset},
                                                                          "score_noise": 0.0}}],
                           corpus=small_corpus)
        quiet_audit(m)
        runs.append(folder / "run")
    from babelrun.analyses import drift

    result = drift.run(*runs, replicates=100)
    langs = {d.lang: d for d in result.pointwise[0].languages}
    assert langs["zh"].references.value == 2.0 and langs["en"].references.value == 0.0
    assert "pointwise" in drift.text(result)


# ---- judges that are code --------------------------------------------------------------------


JUDGE_MODULE = '''
import time

def longer(request):
    time.sleep(0.002)
    return "A" if len(request.answer_a) >= len(request.answer_b) else "B"

async def scored(request):
    return {"score": 9 if request.order == "reference" else 3, "raw": "scored by code"}
'''

PLUGIN_MODULE = '''
import time
from babelrun.judges import Capabilities, JudgeReply

class EchoJudge:
    capabilities = Capabilities(in_process=True)

    def __init__(self, spec, judge_id, seed):
        self.spec, self.judge_id = spec, judge_id

    async def judge(self, request):
        time.sleep(0.002)
        return JudgeReply(raw="tie" if request.item.lang == "zh" else "B")

    async def aclose(self):
        pass
'''


def _install(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    (site / "bbplugin").mkdir(parents=True)
    (site / "userjudge.py").write_text(JUDGE_MODULE)
    (site / "bbplugin" / "__init__.py").write_text(PLUGIN_MODULE)
    info = site / "bbplugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bbplugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[babelrun.judges]\necho = bbplugin:EchoJudge\n")
    return site


def test_python_judges_sync_async_and_a_plugin_audit_in_process(tmp_path, small_corpus, monkeypatch, request):
    site = _install(tmp_path)
    monkeypatch.syspath_prepend(str(site))
    # The plugin registers itself in the registry on first lookup: undone in place with the test.
    request.addfinalizer(lambda: judges.BACKENDS.pop("echo", None))
    m = write_manifest(tmp_path, [
        {"name": "code", "backend": "python", "callable": "userjudge:longer"},
        {"name": "scored", "backend": "python", "callable": "userjudge:scored", "protocol": "pointwise",
         "prompt": "pointwise"},
        {"name": "plugin", "backend": "echo"}], corpus=small_corpus)
    result = quiet_audit(m)
    cards = {j.judge: j for j in result.cards.judges}
    assert cards["code"].overall.verbosity.value == 1.0
    assert cards["plugin"].overall.tie_rate.value == pytest.approx(1 / 3, abs=1e-4)
    assert result.cards.pointwise[0].overall.discrimination.value == 1.0
    assert result.cards.pointwise[0].overall.margin.value == 6.0
    with pytest.raises(ManifestError, match="does not apply"):  # the plugin declared no HTTP options
        manifest.load(write_manifest(tmp_path, [{"name": "p", "backend": "echo", "endpoint": "http://x"}]))


@pytest.mark.parametrize("judge", [{"name": "code", "backend": "python", "callable": "userjudge:longer"},
                                   {"name": "plugin", "backend": "echo", "concurrency": 2}])
def test_code_judges_resume_after_sigkill(tmp_path, small_corpus, judge):
    site = _install(tmp_path)
    m = write_manifest(tmp_path, [judge], corpus=small_corpus)
    env = {**os.environ, "PYTHONPATH": str(site)}
    cmd = [sys.executable, "-m", "babelrun", "audit", str(m), "--progress-every", "0.5"]
    kill_after_records(cmd, tmp_path / "run", 20, env=env)
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    table = read_table(tmp_path / "run", compact.SCHEMA)
    ok = [k for k, s in zip(zip(table["item_id"].to_pylist(), table["order"].to_pylist(), strict=True),
                            table["status"].to_pylist(), strict=True) if s == "ok"]
    assert len(ok) == len(set(ok))  # one record per key
    assert len(set(ok)) == compact.load(tmp_path / "run").num_rows == _cards(tmp_path / "run")["judges"][0]["overall"][
        "presentations"]


def test_callable_errors_follow_the_retry_rules(tmp_path, small_corpus, monkeypatch):
    (tmp_path / "flaky.py").write_text(
        "calls = {}\n"
        "def judge(request):\n"
        "    n = calls[request.item.item_id + request.order] = calls.get(request.item.item_id + request.order, 0) + 1\n"
        "    if n == 1:\n"
        "        raise TimeoutError('slow')\n"
        "    if request.item.lang == 'zh':\n"
        "        raise ValueError('cannot judge this')\n"
        "    return {'verdict': 'A'}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    m = write_manifest(tmp_path, [{"name": "flaky", "backend": "python", "callable": "flaky:judge", "retries": 2,
                                   "max_consecutive_failures": 1000}], corpus=small_corpus)
    result = quiet_audit(m)
    state = result.stats.judges[0]
    assert state.retries > 0 and state.errors["callable_error"] > 0
    errors = [r for r in _records(tmp_path / "run") if r["status"] == "error"]
    assert errors and all(r["lang"] == "zh" and r["error_kind"] == "callable_error" for r in errors)


# ---- OpenAI client conventions ----------------------------------------------------------------


def test_openai_environment_defaults_headers_reasoning_and_azure(tmp_path, small_corpus):
    key = "sk-secret-never-written-123"
    with FakeJudgeServer(api_key=key) as server:
        env = {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": key, "OPENAI_ORG_ID": "org-1", "TRACE": "t-9"}
        m = write_manifest(tmp_path, [{"name": "o", "backend": "openai", "model": "o4-mini", "reasoning_effort": "low",
                                       "headers": {"X-Team": "eval"}, "headers_env": {"X-Trace": "TRACE"},
                                       "project": "proj-1"}], corpus=small_corpus)
        loaded = manifest.load(m, environ=env)
        spec = loaded.judges[0]
        assert (spec.endpoint, spec.api_key_env, spec.options.organization) == (server.url, "OPENAI_API_KEY", "org-1")
        from babelrun.judges.openai import OpenAIJudge, headers_of

        judge = OpenAIJudge(spec, judges.judge_id(spec))
        request = Judging.of(spec).request(_item(lang="en"), "ref_first")
        body = json.loads(judge.body(request))
        assert body["max_completion_tokens"] == 1024 and body["reasoning_effort"] == "low"
        assert "temperature" not in body and "max_tokens" not in body
        headers = headers_of(spec, env)
        assert headers["Authorization"] == f"Bearer {key}" and headers["OpenAI-Organization"] == "org-1"
        assert (headers["OpenAI-Project"], headers["X-Team"], headers["X-Trace"]) == ("proj-1", "eval", "t-9")
        with pytest.raises(ManifestError) as info:
            manifest.load(m, environ={k: v for k, v in env.items() if k != "TRACE"})
        assert info.value.path == "judges[0].headers_env.X-Trace"
        # The manifest wins over the environment.
        m2 = write_manifest(tmp_path, [{"name": "o", "backend": "openai", "model": "m",
                                        "endpoint": "http://127.0.0.1:9/v1"}])
        assert manifest.load(m2, environ=env).judges[0].endpoint == "http://127.0.0.1:9/v1"

    with FakeJudgeServer() as server:
        base = server.url.removesuffix("/v1")
        env = {"AZURE_OPENAI_ENDPOINT": base, "AZURE_OPENAI_API_KEY": key}
        m = write_manifest(tmp_path, [{"name": "az", "backend": "azure", "azure": {"deployment": "gpt4o-eval"}}],
                           corpus=small_corpus)
        old = dict(os.environ)
        os.environ.update(env)
        try:
            quiet_audit(m)
        finally:
            os.environ.clear()
            os.environ.update(old)
        assert server.last_path == "/openai/deployments/gpt4o-eval/chat/completions?api-version=2024-10-21"
        assert server.last_headers["api-key"] == key and "Authorization" not in server.last_headers
    assert _cards(tmp_path / "run")["judges"][0]["overall"]["presentations"] > 0
    assert key.encode() not in files_bytes(tmp_path / "run")


def test_graded_labels_and_other_tools_field_names(tmp_path, small_corpus):
    """inspect_ai's model_graded_qa (GRADE: C/P/I, {criterion}) and alpaca_eval's names
    ({instruction}, {output_1}, {output_2}; m/M) work unchanged."""
    read = score_reader(VerdictSpec(pattern=r"GRADE: ([CPI])", scale=(0, 1), values={"C": 1, "P": 0.5, "I": 0}))
    assert (read("... GRADE: C"), read("GRADE: P"), read("GRADE: X")) == (1.0, 0.5, None)
    alpaca = Judging.of(judge_spec(name="a", backend="simulated", prompt=manifest.PromptSpec(
        user="{instruction}\n(a) {output_1}\n(b) {output_2}"),
        verdict=VerdictSpec(pattern=r"^\s*([mM])\b", match="first", labels={"m": "A", "M": "B"})))
    assert alpaca.request(_item(), "ref_first").messages[-1]["content"] == "Q?\n(a) REF\n(b) PERT"
    m = write_manifest(tmp_path, [{
        "name": "graded", "backend": "simulated", "protocol": "pointwise",
        "prompt": {"user": "[Question] {question}\n[Submission] {answer}\nEnd with GRADE: C, P or I."},
        "verdict": {"pattern": "GRADE: ([CPI])", "scale": [0, 1], "values": {"C": 1, "P": 0.5, "I": 0}},
        "simulated": {"score_reference": 1.0, "score_drop": 0.6, "score_noise": 0.2}}], corpus=small_corpus)
    card = quiet_audit(m).cards.pointwise[0].overall
    assert card.invalid_rate.value == 0 and card.discrimination.value > 0.7
    with pytest.raises(ManifestError, match="outside scale"):
        manifest.load(write_manifest(tmp_path, [{
            "name": "g", "backend": "simulated", "protocol": "pointwise", "prompt": "pointwise",
            "verdict": {"pattern": "([CI])", "scale": [0, 1], "values": {"C": 2}}}]))


def test_reference_guided_template_reads_the_corpus_reference_answer(tmp_path, monkeypatch):
    rows = [{"prompt": f"What is {i} + {i}?", "reference": f"It is {2 * i}. Adding {i} to itself gives {2 * i}.",
             "reference_answer": f"{2 * i}", "language": "en"} for i in range(1, 5)]
    (tmp_path / "refs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "seen.py").write_text(
        "seen = []\n"
        "def judge(request):\n"
        "    seen.append(request.messages[-1]['content'])\n"
        "    return 'A'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    m = write_manifest(tmp_path, [{
        "name": "math", "backend": "python", "callable": "seen:judge",
        "prompt": {"user": "{question}\n[Reference] {ref_answer_1}\n[A] {answer_a}\n[B] {answer_b}"}}],
        corpus={"sources": [{"kind": "jsonl", "path": "refs.jsonl"}]})
    quiet_audit(m)
    import seen

    assert seen.seen and all(re.search(r"What is (\d) \+ \1\?\n\[Reference\] (\d+)\n", text) for text in seen.seen)
    for text in seen.seen:
        i = int(re.search(r"What is (\d)", text).group(1))
        assert f"[Reference] {2 * i}\n" in text


def test_anthropic_extended_thinking_is_a_per_backend_option(tmp_path):
    from babelrun.judges.anthropic import AnthropicJudge

    spec = judge_spec(name="c", backend="anthropic", model="claude", reasoning_effort="low", verdict=VerdictSpec(
        **PAIR_VERDICT))
    body = json.loads(AnthropicJudge(spec, judges.judge_id(spec)).body(
        Judging.of(spec).request(_item(lang="en"), "ref_first")))
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048} and body["max_tokens"] == 2048 + 1024
    assert "temperature" not in body
    from babelrun.judges.gemini import GeminiJudge

    gspec = judge_spec(name="c", backend="gemini", model="claude", reasoning_effort="high", verdict=spec.verdict)
    config = json.loads(GeminiJudge(gspec, judges.judge_id(gspec)).body(
        Judging.of(gspec).request(_item(lang="en"), "ref_first")))["generationConfig"]
    assert config["thinkingConfig"] == {"thinkingBudget": 24576} and config["maxOutputTokens"] == 24576 + 1024
    with pytest.raises(ManifestError, match="does not apply"):  # the simulated judge takes none
        manifest.load(write_manifest(tmp_path, [{"name": "s", "backend": "simulated", "reasoning": True}]))


def test_pointwise_shards_partition_the_keys_and_merge_to_the_one_process_cards(tmp_path, small_corpus):
    judge = {"name": "point", "backend": "simulated", "protocol": "pointwise", "prompt": "pointwise"}
    whole, sharded = tmp_path / "whole", tmp_path / "sharded"
    for folder in (whole, sharded):
        folder.mkdir()
        write_manifest(folder, [judge], corpus=small_corpus)
    subprocess.run([sys.executable, "-m", "babelrun", "audit", str(whole / "manifest.yaml")], cwd=ROOT, check=True,
                   capture_output=True)
    for i in range(2):
        subprocess.run([sys.executable, "-m", "babelrun", "audit", str(sharded / "manifest.yaml"), "--shard", f"{i}/2"],
                       cwd=ROOT, check=True, capture_output=True)
    keys = [{(r["item_id"], r["order"]) for r in map(json.loads, seg.read_text().splitlines())}
            for seg in sorted((sharded / "run" / "log").glob("*.jsonl"))]
    assert len(keys) == 2 and not keys[0] & keys[1] and min(map(len, keys)) > 0
    assert {order for part in keys for _, order in part} == {"reference", "degraded"}
    subprocess.run([sys.executable, "-m", "babelrun", "merge", str(sharded / "run")], cwd=ROOT, check=True,
                   capture_output=True)
    assert _cards(sharded / "run")["pointwise"] == _cards(whole / "run")["pointwise"]

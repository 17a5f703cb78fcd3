"""The prompt mechanisms with no tool behind them (docs/judges.md, *Prompt files of other
tools*): a Jinja2 template whose own names ``fields:`` maps, a ``.py`` file's constants read
without importing it, a system file and a user file, letter grades mapped to scores. Each
audit goes through the CLI (its exit status) and a loopback judge that reads the answers out
of the rendered request, so a name bound to the wrong field shows in the card."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from babelrun import manifest
from babelrun.errors import ManifestError
from helpers import ROOT, LoopbackServer, quiet_audit, write_manifest

JINJA = """{# a judge of our own, in Jinja2, with its own names #}
{% if lang_name %}The conversation is in {{ lang_name }}.{% endif %}
[Instruction]
{{ instruction | trim }}

{% for tag, text in [("1", response_1), ("2", response_2)] -%}
<response {{ tag }}>
{{ text }}
</response {{ tag }}>
{% endfor %}
Which response is better? End with [[1]] or [[2]].
"""
JINJA_FIELDS = {"instruction": "question", "response_1": "answer_a", "response_2": "answer_b",
                "lang_name": "language"}


def _between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


class LongerJudge(LoopbackServer):
    """An OpenAI-compatible judge on 127.0.0.1 that names the longer of the two answers it
    reads out of the request (``read``), in ``reply`` form, except one request in
    ``off_format`` (by a hash of its text), answered off-format."""

    def __init__(self, read, reply: str, off_format: int = 0, labels: tuple[str, str] = ("1", "2")):
        self.read, self.reply, self.off_format, self.labels = read, reply, off_format, labels
        self.bodies: list[dict] = []

    def add_routes(self, app) -> None:
        from aiohttp import web

        async def chat(request):
            body = await request.json()
            self.bodies.append(body)
            messages = body["messages"]
            a, b = self.read(messages[0]["content"] if len(messages) > 1 else "", messages[-1]["content"])
            text = self.reply.format(label=self.labels[0] if len(a) >= len(b) else self.labels[1])
            digest = int(hashlib.blake2b(messages[-1]["content"].encode(), digest_size=4).hexdigest(), 16)
            if self.off_format and digest % self.off_format == 0:
                text = "Both are fine."
            return web.json_response({"id": "x", "object": "chat.completion", "model": body["model"],
                                      "choices": [{"index": 0, "finish_reason": "stop",
                                                   "message": {"role": "assistant", "content": text}}],
                                      "usage": {"prompt_tokens": 10, "completion_tokens": 5}})

        app.router.add_post("/v1/chat/completions", chat)


def _judge(server, **fields) -> dict:
    return {"name": "mine", "backend": "openai", "model": "m", "endpoint": f"{server.url}/v1", **fields}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "babelrun", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=240)


def _card(run: Path) -> dict:
    return json.loads((run / "cards.json").read_bytes())["judges"][0]["overall"]


CORPUS = {"sources": [{"kind": "bundled"}], "languages": ["en", "hi", "zh"], "references_per_language": 4}


def test_jinja2_template_with_its_own_names_mapped_by_fields(tmp_path):
    (tmp_path / "judge.j2").write_text(JINJA)

    def read(_: str, user: str) -> tuple[str, str]:
        return _between(user, "<response 1>\n", "\n</response 1>"), _between(user, "<response 2>\n", "\n</response 2>")

    with LongerJudge(read, "Response {label} is longer. [[{label}]]", off_format=40) as server:
        m = write_manifest(tmp_path, [_judge(server, prompt={"file": "judge.j2", "fields": JINJA_FIELDS},
                                             verdict={"pattern": r"\[\[([12])\]\]", "labels": {"1": "A", "2": "B"}})],
                           corpus=CORPUS)
        done = _cli("audit", str(m))
        user = server.bodies[-1]["messages"][-1]["content"]
    assert done.returncode == 0, done.stderr
    card = _card(tmp_path / "run")
    assert 0 < card["invalid_rate"]["value"] < 0.05, card["invalid_rate"]
    assert card["verbosity"]["value"] >= 0.9, card["verbosity"]
    assert user.startswith("\nThe conversation is in ") and "[Instruction]\n" in user and "{{" not in user
    run_yaml = (tmp_path / "run" / "run.yaml").read_text()
    assert "syntax: jinja2" in run_yaml and "response_1: answer_a" in run_yaml


def test_jinja2_template_under_the_simulated_judge_recovers_its_planted_knobs(tmp_path):
    """The simulated judge writes its verdict in the template's declared format ([[1]] / [[2]]
    through labels), so its planted biases come back through the user's own verdict reading."""
    (tmp_path / "judge.j2").write_text(JINJA)
    knobs = {"verbosity_bias": 0.8, "invalid_rate": 0.02, "accuracy": {"en": 0.5, "hi": 0.5, "zh": 0.5}}
    m = write_manifest(tmp_path, [{"name": "sim", "backend": "simulated", "simulated": knobs,
                                   "prompt": {"file": "judge.j2", "fields": JINJA_FIELDS},
                                   "verdict": {"pattern": r"\[\[([12])\]\]", "labels": {"1": "A", "2": "B"}}}],
                       corpus={**CORPUS, "references_per_language": 12})
    assert _cli("audit", str(m)).returncode == 0
    card = _card(tmp_path / "run")
    assert card["invalid_rate"]["value"] < 0.05
    assert 2 * card["verbosity"]["value"] - 1 == pytest.approx(0.8, abs=0.12)  # 2v - 1 estimates verbosity_bias
    raw = next((tmp_path / "run" / "log").glob("*.jsonl")).read_text()
    assert "[[1]]" in raw and "[[2]]" in raw


def test_a_py_files_constants_are_read_by_name_and_the_module_never_imported(tmp_path):
    marker = tmp_path / "IMPORTED"
    (tmp_path / "judge_prompts.py").write_text(
        "import pathlib\n"
        f"pathlib.Path({str(marker)!r}).write_text('the module ran')\n"
        "SYSTEM = ('You compare two answers. '\n          'End with [[A]] or [[B]].')\n"
        'USER = """Q: {question}\n<a>{answer_a}</a>\n<b>{answer_b}</b>"""\n'
        "MODEL = 'x'\nLATER = f'{MODEL} judges {args.model_name}'\n")
    read = lambda _, user: (_between(user, "<a>", "</a>"), _between(user, "<b>", "</b>"))  # noqa: E731
    with LongerJudge(read, "[[{label}]]", labels=("A", "B")) as server:
        m = write_manifest(tmp_path, [_judge(server, prompt={
            "system": {"file": "judge_prompts.py", "name": "SYSTEM"},
            "user": {"file": "judge_prompts.py", "name": "USER"}}, verdict={"pattern": r"\[\[([AB])\]\]"})],
                           corpus=CORPUS)
        quiet_audit(m)
        system = server.bodies[-1]["messages"][0]["content"]
    assert system == "You compare two answers. End with [[A]] or [[B]]."
    assert _card(tmp_path / "run")["verbosity"]["value"] >= 0.95
    assert not marker.exists() and "judge_prompts" not in sys.modules
    bad = write_manifest(tmp_path, [{"name": "mine", "backend": "simulated",
                                     "prompt": {"file": "judge_prompts.py", "name": "LATER"}}])
    with pytest.raises(ManifestError) as info:
        manifest.load(bad)
    assert info.value.path == "judges[0].prompt.name" and "\n" not in info.value.problem
    assert "f-string" in info.value.problem and "MODEL, args.model_name" in info.value.problem
    assert not marker.exists()


def test_a_system_file_and_a_user_file_with_a_double_bracket_verdict(tmp_path):
    (tmp_path / "system.txt").write_text("You are a fair judge. Finish with [[A]] or [[B]].\n")
    (tmp_path / "user.txt").write_text("Question: {question}\n\n[A]\n{answer_a}\n[/A]\n\n[B]\n{answer_b}\n[/B]\n")
    read = lambda _, user: (_between(user, "[A]\n", "\n[/A]"), _between(user, "[B]\n", "\n[/B]"))  # noqa: E731
    with LongerJudge(read, "I prefer this one: [[{label}]]", labels=("A", "B")) as server:
        m = write_manifest(tmp_path, [_judge(server, prompt={"system": {"file": "system.txt"},
                                                             "user": {"file": "user.txt"}},
                                             verdict={"pattern": r"\[\[([AB])\]\]"})], corpus=CORPUS)
        quiet_audit(m)
        system, user = (x["content"] for x in server.bodies[-1]["messages"])
    card = _card(tmp_path / "run")
    assert card["verbosity"]["value"] >= 0.95 and card["invalid_rate"]["value"] == 0
    assert system == "You are a fair judge. Finish with [[A]] or [[B]].\n" and user.startswith("Question: ")
    assert "system.txt + user.txt" in (tmp_path / "run" / "run.yaml").read_text()


def test_letter_grades_map_to_scores_for_a_pointwise_judge(tmp_path):
    grades = {"pattern": r"GRADE: ([CI])", "labels": {"C": 1, "I": 0}, "scale": [0, 1]}
    judge = {"name": "grader", "backend": "simulated", "protocol": "pointwise", "verdict": grades,
             "prompt": {"user": "Question: {question}\nSubmission: {answer}\nEnd with GRADE: C or GRADE: I."},
             "simulated": {"score_reference": 1.0, "score_drop": 1.0, "score_noise": 0.2, "invalid_rate": 0.1}}
    m = write_manifest(tmp_path, [judge], corpus=CORPUS)
    quiet_audit(m)
    records = [json.loads(line) for p in (tmp_path / "run" / "log").glob("*.jsonl")
               for line in p.read_text().splitlines()]
    ok = [r for r in records if r.get("score") is not None]
    assert {r["score"] for r in ok} == {0.0, 1.0}
    assert all(r["raw"].endswith(f"GRADE: {'C' if r['score'] == 1.0 else 'I'}") for r in ok)
    card = json.loads((tmp_path / "run" / "cards.json").read_bytes())["pointwise"][0]["overall"]
    assert card["discrimination"]["value"] > 0.7  # the planted quality signal: the reference graded C more often
    assert 0.05 < card["invalid_rate"]["value"] < 0.15  # the planted off-format rate
    # the older spelling, values:, is the same verdict and the same judge
    old = write_manifest(tmp_path, [{**judge, "verdict": {**grades, "labels": {}, "values": {"C": 1, "I": 0}}}],
                         corpus=CORPUS)
    from babelrun import judges

    assert judges.judge_id(manifest.load(old).judges[0]) == judges.judge_id(manifest.load(m).judges[0])

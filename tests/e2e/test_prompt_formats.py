"""Real judge prompt files of other tools, audited unchanged through a loopback judge.

Each file under ``tests/fixtures/prompt_formats`` (README there: sources and licences) is
named by the manifest as it is; only manifest settings say how to read it. The loopback judge
reads the two answers out of the request the way its tool lays them out and always prefers
the longer one, replying in that tool's format; each card must recover that (v ≥ 0.95, or a
positive verbosity gain for a pointwise judge).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import msgspec
import pytest

from babelrun import manifest
from babelrun.errors import ManifestError
from babelrun.judges.protocol import Judging
from helpers import ROOT, SHARED_DATA, LoopbackServer, quiet_audit, write_manifest

FIXTURES = ROOT / "tests" / "fixtures" / "prompt_formats"
ALPACA = FIXTURES / "alpaca_eval" / "evaluators_configs"
MT_BENCH = SHARED_DATA / "judge-prompts" / "mt-bench-judge_prompts.jsonl"


def _between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def _longer_first(a: str, b: str) -> bool:
    return len(a) >= len(b)


class ToolJudge(LoopbackServer):
    """An OpenAI-compatible judge on 127.0.0.1 that always prefers the longer answer: ``read``
    takes the (system, user) text to the two answers as presented (A, B), ``reply`` the
    preference (True: A) to the reply text; ``soft`` tokens: logprobs of (A's, B's) token."""

    def __init__(self, read, reply=None, soft: tuple[str, str] | None = None):
        self.read, self.reply_of, self.soft = read, reply, soft
        self.bodies: list[dict] = []

    def add_routes(self, app) -> None:
        from aiohttp import web

        async def chat(request):
            body = await request.json()
            self.bodies.append(body)
            messages = body["messages"]
            system = messages[0]["content"] if messages[0]["role"] == "system" else ""
            a, b = self.read(system, messages[-1]["content"])
            first = _longer_first(a, b)
            message = {"role": "assistant", "content": ""}
            choice: dict = {"index": 0, "message": message, "finish_reason": "stop"}
            if self.soft is not None:
                win, lose = self.soft if first else self.soft[::-1]
                message["content"] = win
                top = [{"token": win, "logprob": math.log(0.9)}, {"token": lose, "logprob": math.log(0.08)},
                       {"token": "The", "logprob": math.log(0.02)}]
                choice["logprobs"] = {"content": [{"token": win, "logprob": math.log(0.9), "top_logprobs": top}]}
            else:
                message["content"] = self.reply_of(first, a, b)
            return web.json_response({"id": "x", "object": "chat.completion", "model": body["model"],
                                      "choices": [choice], "usage": {"prompt_tokens": 10, "completion_tokens": 5}})

        app.router.add_post("/v1/chat/completions", chat)


def _judge(server: ToolJudge, **fields) -> dict:
    return {"name": "tool", "backend": "openai", "model": "gpt-x", "endpoint": f"{server.url}/v1", **fields}


def _card(run: Path, kind: str = "judges") -> dict:
    return json.loads((run / "cards.json").read_bytes())[kind][0]["overall"]


def _assert_longer_recovered(card: dict) -> None:
    assert card["verbosity"]["value"] >= 0.95, card["verbosity"]
    assert card["invalid_rate"]["value"] == 0


# ---- alpaca_eval ------------------------------------------------------------------------------


def _alpaca_answers(_: str, user: str, key: str) -> tuple[str, str]:
    parts = user.split(f'"{key}": """')
    return parts[1].split('"""', 1)[0], parts[2].split('"""', 1)[0]


def test_alpaca_eval_gpt4_annotator_ranking_parser(tmp_path, small_corpus):
    def ranking(first: bool, a: str, b: str) -> str:
        r1, r2 = (1, 2) if first else (2, 1)
        return f"[\n    {{'model': 'model_1', 'rank': {r1}}},\n    {{'model': 'model_2', 'rank': {r2}}}\n]"

    with ToolJudge(lambda s, u: _alpaca_answers(s, u, "answer"), ranking) as server:
        judge = _judge(server, prompt={"file": str(ALPACA / "alpaca_eval_gpt4" / "configs.yaml")})
        quiet_audit({"judges": [judge], "corpus": small_corpus}, folder=tmp_path)
        card = _card(tmp_path / "run")
        body = server.bodies[-1]
    _assert_longer_recovered(card)
    system, user = (m["content"] for m in body["messages"])
    assert system == "You are a helpful assistant, that ranks models by the quality of their answers."
    assert '{\n    "instruction": """' in user and "<|im_start|>" not in user and "{{" not in user


def test_alpaca_eval_2_weighted_annotator_reads_logprobs_of_m_and_M(tmp_path, small_corpus):
    with ToolJudge(lambda s, u: _alpaca_answers(s, u, "output"), soft=("m", "M")) as server:
        judge = _judge(server, soft=True,
                       prompt={"file": str(ALPACA / "weighted_alpaca_eval_gpt4_turbo" / "configs.yaml")})
        quiet_audit({"judges": [judge], "corpus": small_corpus}, folder=tmp_path)
        card = _card(tmp_path / "run")
        body = server.bodies[-1]
    _assert_longer_recovered(card)
    assert body["logprobs"] is True and body["max_tokens"] == 1
    assert '"model_identifier": "M"' in body["messages"][1]["content"]
    records = [json.loads(line) for p in (tmp_path / "run" / "log").glob("*.jsonl")
               for line in p.read_text().splitlines()]
    assert records and all(max(r["p_a"], r["p_b"]) == pytest.approx(0.9 / 0.98, abs=1e-3) for r in records)


def test_alpaca_eval_logprob_parser_needs_soft_and_names_the_fix(tmp_path):
    config = str(ALPACA / "weighted_alpaca_eval_gpt4_turbo" / "configs.yaml")
    m = write_manifest(tmp_path, [{"name": "w", "backend": "openai", "model": "x", "endpoint": "http://127.0.0.1:9/v1",
                                   "prompt": {"file": config}}])
    with pytest.raises(ManifestError) as info:
        manifest.load(m)
    assert info.value.path == "judges[0].soft" and "alpaca_eval's logprob_parser" in info.value.problem


# ---- LLMBar, JudgeLM, promptfoo, MT-Bench -------------------------------------------------------


def test_llmbar_vanilla_prompt(tmp_path, small_corpus):
    def read(_: str, user: str) -> tuple[str, str]:
        return (_between(user, "# Output (a):\n", "\n\n# Output (b):"),
                _between(user, "# Output (b):\n", "\n\n# Which is better"))

    with ToolJudge(read, lambda first, a, b: "Output (a)" if first else "Output (b)") as server:
        judge = _judge(server, prompt=str(FIXTURES / "llmbar" / "Vanilla.txt"),
                       verdict={"pattern": r"Output \(([ab])\)", "labels": {"a": "A", "b": "B"}})
        quiet_audit({"judges": [judge], "corpus": small_corpus}, folder=tmp_path)
        card = _card(tmp_path / "run")
        body = server.bodies[-1]
    _assert_longer_recovered(card)
    assert body["messages"][0]["content"].startswith("You are a helpful assistant in evaluating")
    assert "# Instruction:\n" in body["messages"][1]["content"]


def test_judgelm_two_score_prompt_fills_its_prompt_block_from_the_file(tmp_path, small_corpus):
    def read(_: str, user: str) -> tuple[str, str]:
        return (_between(user, "[The Start of Assistant 1's Answer]\n", "\n\n[The End of Assistant 1's Answer]"),
                _between(user, "[The Start of Assistant 2's Answer]\n", "\n\n[The End of Assistant 2's Answer]"))

    def scores(first: bool, a: str, b: str) -> str:
        sa, sb = (8, 6) if len(a) > len(b) else (6, 8) if len(b) > len(a) else (7, 7)
        return f"{sa} {sb}\nAssistant 1 wrote {len(a)} characters, Assistant 2 {len(b)}."

    with ToolJudge(read, scores) as server:
        judge = _judge(server, prompt={"file": str(FIXTURES / "judgelm" / "judgelm_prompts.jsonl")},
                       verdict={"scores": r"^\s*(\d+(?:\.\d+)?)\s+(\d+(?:\.\d+)?)", "match": "first"})
        quiet_audit({"judges": [judge], "corpus": small_corpus}, folder=tmp_path)
        card = _card(tmp_path / "run")
        user = server.bodies[-1]["messages"][1]["content"]
    assert card["verbosity"]["value"] >= 0.95 and card["invalid_rate"]["value"] == 0
    # the {prompt} block is JudgeLM's instructions, not the question
    assert "[System]\nWe would like to request your feedback" in user
    assert user.split("[Question]\n", 1)[1].split("\n\n[The Start", 1)[0] != user.split("[System]\n", 1)[1].strip()


def test_promptfoo_rubric_prompt_pointwise(tmp_path, small_corpus):
    def read(_: str, user: str) -> tuple[str, str]:
        answer = _between(user, "<Output>\n", "\n</Output>")
        return answer, ""

    def grade(first: bool, a: str, b: str) -> str:  # a longer answer scores higher
        score = round(min(1.0, len(a) / 2000), 3)
        return json.dumps({"reason": f"{len(a)} characters", "pass": score > 0.5, "score": score})

    with ToolJudge(read, grade) as server:
        m = write_manifest(tmp_path, [_judge(
            server, protocol="pointwise", prompt={"file": str(FIXTURES / "promptfoo" / "rubric_prompt.json"),
                                                  "vars": {"rubric": "The output answers this well: {question}"}},
            verdict={"pattern": r'"score"\s*:\s*([0-9.]+)', "scale": [0, 1]})], corpus=small_corpus)
        quiet_audit(m)
        body = server.bodies[-1]
    card = _card(tmp_path / "run", "pointwise")
    assert card["verbosity_gain"]["value"] > 0 and card["invalid_rate"]["value"] == 0
    system, user = (m["content"] for m in body["messages"])
    assert "{reason: string, pass: boolean, score: number}" in system  # single braces: literal
    assert "<Rubric>\nThe output answers this well: " in user and "{{" not in user


def test_promptfoo_rubric_without_its_rubric_text_is_refused_naming_the_fix(tmp_path):
    m = write_manifest(tmp_path, [{"name": "p", "backend": "simulated", "protocol": "pointwise",
                                   "prompt": {"file": str(FIXTURES / "promptfoo" / "rubric_prompt.json")},
                                   "verdict": {"pattern": r'"score"\s*:\s*([0-9.]+)', "scale": [0, 1]}}])
    with pytest.raises(ManifestError) as info:
        manifest.load(m)
    assert "promptfoo" in info.value.problem and "vars: {rubric:" in info.value.problem
    m = write_manifest(tmp_path, [{"name": "p", "backend": "simulated", "protocol": "pointwise",
                                   "prompt": {"file": str(FIXTURES / "promptfoo" / "rubric_prompt.json"),
                                              "vars": {"rubric": "r", "rubrik": "typo"}},
                                   "verdict": {"pattern": r'"score"\s*:\s*([0-9.]+)', "scale": [0, 1]}}])
    with pytest.raises(ManifestError) as info:  # a var that fills nothing is refused, never ignored
        manifest.load(m)
    assert info.value.path == "judges[0].prompt.vars.rubrik" and "not a field" in info.value.problem


needs_mt_bench = pytest.mark.skipif(not MT_BENCH.is_file(), reason="shared MT-Bench judge prompts absent")


MT_VERDICT = {"pattern": r"\[\[([ABC])\]\]", "labels": {"A": "A", "B": "B", "C": "tie"}}


def _two_turn_pairs(path: Path, n: int = 24) -> Path:
    """Labelled two-turn pairs: the earlier turn in ``turns``; the better last answer is the
    longer in half of them and the shorter in the other half."""
    rows = []
    for i in range(n):
        short, long = f"Short answer {i}.", f"A longer answer {i}, " + "with more words " * (2 + i % 5) + "."
        better_long = i % 2 == 0
        first, second = (long, short) if i % 3 else (short, long)
        label = 1 if (first == long) == better_long else 2
        rows.append({"input": f"And why is that, part {i}?", "output_1": first, "output_2": second, "label": label,
                     "turns": [{"input": f"Question {i}?", "output_1": f"Earlier one {i}",
                                "output_2": f"Earlier two {i}"}]})
    path.write_text(json.dumps(rows))
    return path


@needs_mt_bench
def test_mt_bench_multi_turn_pair_prompt_reads_the_earlier_turn_of_labelled_pairs(tmp_path):
    def read(_: str, user: str) -> tuple[str, str]:
        def last(side: str) -> str:
            return user.split(f"### Assistant {side}:\n")[-1].split(f"\n\n<|The End of Assistant {side}", 1)[0]
        return last("A"), last("B")

    pairs = _two_turn_pairs(tmp_path / "two-turn.json")
    with ToolJudge(read, lambda first, a, b: "[[A]]" if first else "[[B]]") as server:
        m = write_manifest(tmp_path, [_judge(server, prompt={"file": str(MT_BENCH), "name": "pair-v2-multi-turn"},
                                             verdict=MT_VERDICT)],
                           corpus={"sources": [{"kind": "labelled_pairs", "path": str(pairs)}]})
        quiet_audit(m)
        bodies = list(server.bodies)
    rows = json.loads(pairs.read_text())
    for body in bodies:  # each slot's earlier answer is from the same conversation as its last one
        user = body["messages"][1]["content"]
        i = int(re.search(r"part (\d+)\?", user).group(1))
        last_a, _ = read("", user)
        earlier_a = user.split("### Assistant A:\n", 1)[1].split("\n", 1)[0]
        assert earlier_a == (f"Earlier one {i}" if last_a == rows[i]["output_1"] else f"Earlier two {i}")
    card = json.loads((tmp_path / "run" / "cards.json").read_bytes())["pairs"][0]["judges"][0]["overall"]
    assert card["verbosity"]["value"] >= 0.95 and card["invalid_rate"]["value"] == 0
    assert card["accuracy"]["value"] == 0.5  # the longer answer is the better one in half the pairs
    turn_1 = re.search(r"### User:\nQuestion (\d+)\?\n\n### Assistant A:\nEarlier (one|two) \1\n", user)
    assert turn_1 is not None and "### User:\nAnd why is that, part " + turn_1.group(1) in user


@needs_mt_bench
def test_mt_bench_multi_turn_pair_prompt_without_turns_is_refused_with_the_fix(tmp_path):
    m = write_manifest(tmp_path, [{"name": "mt", "backend": "simulated",
                                   "prompt": {"file": str(MT_BENCH), "name": "pair-v2-multi-turn"},
                                   "verdict": MT_VERDICT}])
    with pytest.raises(ManifestError) as info:
        manifest.load(m)
    assert info.value.path == "judges[0].prompt" and "\n" not in info.value.problem
    assert "MT-Bench's multi-turn" in info.value.problem and "turns column" in info.value.problem
    single = write_manifest(tmp_path, [{"name": "mt", "backend": "simulated", "protocol": "pointwise",
                                        "prompt": {"file": str(MT_BENCH), "name": "single-v1-multi-turn"}}])
    with pytest.raises(ManifestError, match="MT-Bench's multi-turn pointwise"):
        manifest.load(single)


# ---- reading rules ------------------------------------------------------------------------------


def test_plain_string_prompt_is_inline_text_when_it_has_a_newline_or_a_field(tmp_path):
    m = manifest.load(write_manifest(tmp_path, [{"name": "i", "backend": "simulated",
                                                 "prompt": "Q: {question}\nA: {answer_a}\nB: {answer_b}\nA or B?"}]))
    assert m.judges[0].prompt.user == "Q: {question}\nA: {answer_a}\nB: {answer_b}\nA or B?"
    with pytest.raises(ManifestError, match="neither a built-in"):
        manifest.load(write_manifest(tmp_path, [{"name": "i", "backend": "simulated", "prompt": "pairwise-v9"}]))


def test_literal_braces_are_kept_and_fields_still_bound(tmp_path):
    text = 'Reply as JSON: {"winner": "A"}\nQ: {question}\nA: {answer_a}\nB: {answer_b}'
    m = manifest.load(write_manifest(tmp_path, [{"name": "j", "backend": "simulated", "prompt": {"user": text},
                                                 "verdict": {"pattern": r'"winner": "(A|B)"',
                                                             "reply": '"winner": "{label}"'}}]))
    judging = Judging.of(m.judges[0])
    content = judging.request(_item(), "ref_first").messages[-1]["content"]
    assert content == 'Reply as JSON: {"winner": "A"}\nQ: Q?\nA: REF\nB: PERT'
    with pytest.raises(ManifestError, match="plain name"):  # a field-like brace is never read as text
        manifest.load(write_manifest(tmp_path, [{"name": "j", "backend": "simulated", "prompt": {
            "user": '{"x": 1} {answer_a.__class__} {answer_b}'}}]))


def test_chat_markup_splits_into_system_and_user_and_refuses_other_shapes(tmp_path):
    text = "<|im_start|>system\nBe fair.\n<|im_end|>\n<|im_start|>user\n{question} {answer_a} {answer_b}\n<|im_end|>"
    (tmp_path / "p.txt").write_text(text)
    path = write_manifest(tmp_path, [{"name": "c", "backend": "simulated", "prompt": "p.txt"}])
    judge = manifest.load(path).judges[0]
    assert (judge.prompt.system, judge.prompt.user) == ("Be fair.", "{question} {answer_a} {answer_b}")
    (tmp_path / "p.txt").write_text(text + "\n<|im_start|>assistant\nA\n<|im_end|>")
    with pytest.raises(ManifestError, match="one system and one"):
        manifest.load(write_manifest(tmp_path, [{"name": "c", "backend": "simulated", "prompt": "p.txt"}]))


def test_existing_templates_keep_their_text_and_ids(tmp_path):
    from babelrun import judges

    text = "Q {question}\nA {answer_a}\nB {answer_b}\nJSON: {{\"w\": 1}}"
    m = manifest.load(write_manifest(tmp_path, [{"name": "j", "backend": "simulated", "prompt": {"user": text}}]))
    assert m.judges[0].prompt.user == text and m.judges[0].prompt == manifest.PromptSpec(user=text)
    assert judges.judge_id(m.judges[0]) == judges.judge_id(msgspec.structs.replace(m.judges[0],
                                                                                   prompt=manifest.PromptSpec(user=text)))


def _item():
    from babelrun.core.items import Item

    return Item(item_id="0" * 20, kind="text", lang="en", ref_id="r", prompt="Q?", reference="REF", perturbed="PERT",
                perturbation="truncate", severity=0.3, ref_len=3, pert_len=4)


# ---- tools read by the general mechanisms: fields:, .py constants, parts, placeholders written out ----
# Each file is the tool's own (tests/fixtures/prompt_formats/README.md: repository, commit, licence),
# named unchanged; only the manifest settings below say how to read it.

EVALS, ARENA, WILD, REWARD = (FIXTURES / d for d in ("openai_evals", "arena_hard", "wildbench", "reward_bench"))
ARENA_LABELS = {"A>>B": "A", "A>B": "A", "A=B": "tie", "B>A": "B", "B>>A": "B"}


def _audit(tmp_path, server, small_corpus, **fields) -> dict:
    quiet_audit({"judges": [_judge(server, **fields)], "corpus": small_corpus}, folder=tmp_path)
    return _card(tmp_path / "run")


def _pointwise_card(tmp_path, server, small_corpus, **fields) -> dict:
    quiet_audit({"judges": [_judge(server, protocol="pointwise", **fields)], "corpus": small_corpus}, folder=tmp_path)
    return _card(tmp_path / "run", "pointwise")


def test_openai_evals_closedqa_letter_grades_map_to_scores(tmp_path, small_corpus):
    def grade(first: bool, a: str, b: str) -> str:  # a long answer meets the criterion
        letter = "Y" if len(a) > 300 else "N"
        return f"The submission has {len(a)} characters.\n{letter}\n{letter}"

    read = lambda _, user: (_between(user, "[Submission]: ", "\n***\n[Criterion]"), "")  # noqa: E731
    with ToolJudge(read, grade) as server:
        card = _pointwise_card(tmp_path, server, small_corpus,
                               prompt={"file": str(EVALS / "closedqa.yaml"), "fields": {"completion": "answer"},
                                       "vars": {"criteria": "Is the answer correct and complete?"}},
                               verdict={"pattern": r"(?m)^\s*([YN])\s*$", "labels": {"Y": 1, "N": 0},
                                        "scale": [0, 1]})
        user = server.bodies[-1]["messages"][0]["content"]
    assert card["verbosity_gain"]["value"] > 0 and card["invalid_rate"]["value"] == 0
    assert "[Criterion]: Is the answer correct and complete?" in user and "[Task]: " in user


def test_openai_evals_battle_maps_its_two_instructions_and_completions(tmp_path, small_corpus):
    def read(_: str, user: str) -> tuple[str, str]:
        return _between(user, "[Response 1]\n", "\n\n[Instruction 2]"), _between(user, "[Response 2]\n", "\n\n\nIs")

    with ToolJudge(read, lambda first, a, b: "Yes" if first else "No") as server:
        card = _audit(tmp_path, server, small_corpus,
                      prompt={"file": str(EVALS / "battle.yaml"),
                              "fields": {"input1": "question", "completion1": "answer_a", "input2": "question",
                                         "completion2": "answer_b"}},
                      verdict={"pattern": r"\b(Yes|No)\b", "labels": {"Yes": "A", "No": "B"}})
    _assert_longer_recovered(card)


def test_arena_hard_system_from_its_py_constant_user_from_its_config_and_five_labels(tmp_path, small_corpus):
    def read(_: str, user: str) -> tuple[str, str]:
        return (_between(user, "<|The Start of Assistant A's Answer|>\n", "\n<|The End of Assistant A's Answer|>"),
                _between(user, "<|The Start of Assistant B's Answer|>\n", "\n<|The End of Assistant B's Answer|>"))

    def verdict(first: bool, a: str, b: str) -> str:
        much = max(len(a), len(b)) > 2 * min(len(a), len(b))
        return f"My final verdict is: [[{('A>>B' if much else 'A>B') if first else ('B>>A' if much else 'B>A')}]]"

    with ToolJudge(read, verdict) as server:
        card = _audit(tmp_path, server, small_corpus,
                      prompt={"system": {"file": str(ARENA / "judge_utils.py"), "name": "OG_ARENA_HARD_PROMPT"},
                              "user": {"file": str(ARENA / "arena-hard-v2.0.yaml"), "name": "prompt_template"},
                              "fields": {"QUESTION": "question", "ANSWER_A": "answer_a", "ANSWER_B": "answer_b"}},
                      verdict={"pattern": r"\[\[([AB<>=]+)\]\]", "labels": ARENA_LABELS})
        system, user = (m["content"] for m in server.bodies[-1]["messages"])
    _assert_longer_recovered(card)
    assert system.startswith("Please act as an impartial judge") and system.endswith('[[A=B]]".')
    assert user.startswith("<|User Prompt|>\n") and "{QUESTION}" not in user


WILD_HISTORY = {"{$history}": "", "{$checklist}": "- Does the response answer the query correctly?\n"}


def test_wildbench_pairwise_checklist_prompt_with_its_placeholders_written_out(tmp_path, small_corpus):
    def read(_: str, user: str) -> tuple[str, str]:
        return (_between(user, "<|begin_of_response_A|>\n\n", "\n\n<|end_of_response_A|>"),
                _between(user, "<|begin_of_response_B|>\n\n", "\n\n<|end_of_response_B|>"))

    def choice(first: bool, a: str, b: str) -> str:
        return json.dumps({"analysis of A": "…", "analysis of B": "…", "choice": "A+" if first else "B++"}, indent=4)

    with ToolJudge(read, choice) as server:
        card = _audit(tmp_path, server, small_corpus,
                      prompt={"file": str(WILD / "eval_template.pairwise.v2.md"), "vars": WILD_HISTORY,
                              "fields": {"{$user_query}": "question", "{$candidate_A}": "answer_a",
                                         "{$candidate_B}": "answer_b"}},
                      verdict={"pattern": r'"choice"\s*:\s*"(A\+\+|A\+|A=B|B\+|B\+\+)"',
                               "labels": {"A++": "A", "A+": "A", "A=B": "tie", "B+": "B", "B++": "B"}})
        user = server.bodies[-1]["messages"][0]["content"]
    _assert_longer_recovered(card)
    assert "<|begin_of_history|>\n\n\n\n<|end_of_history|>" in user and "- Does the response answer" in user
    assert '```\n{\n    "analysis of A": "[analysis of Response A]",' in user and "{$" not in user


def test_wildbench_score_prompt_pointwise(tmp_path, small_corpus):
    def score(first: bool, a: str, b: str) -> str:
        return json.dumps({"strengths": "…", "weaknesses": "…", "score": str(min(10, 1 + len(a) // 60))}, indent=4)

    read = lambda _, user: (_between(user, "<|begin_of_response|>\n\n", "\n\n<|end_of_response|>"), "")  # noqa: E731
    with ToolJudge(read, score) as server:
        card = _pointwise_card(tmp_path, server, small_corpus,
                               prompt={"file": str(WILD / "eval_template.score.v2.md"), "vars": WILD_HISTORY,
                                       "fields": {"{$user_query}": "question", "{$model_output}": "answer"}},
                               verdict={"pattern": r'"score"\s*:\s*"(\d+)"', "scale": [1, 10]})
    assert card["verbosity_gain"]["value"] > 0 and card["invalid_rate"]["value"] == 0


def test_reward_bench_prompt_dict_read_from_its_py_file_without_importing_it(tmp_path, small_corpus):
    def read(_: str, user: str) -> tuple[str, str]:
        return (_between(user, "[The Start of Assistant A's Answer]\n", "\n[The End of Assistant A's Answer]"),
                _between(user, "[The Start of Assistant B's Answer]\n", "\n[The End of Assistant B's Answer]"))

    with ToolJudge(read, lambda first, a, b: "A is longer. [[A]]" if first else "B is longer. [[B]]") as server:
        card = _audit(tmp_path, server, small_corpus, prompt={"file": str(REWARD / "generative.py"),
                                                              "name": "MTBENCH_V2"},
                      verdict={"pattern": r"\[\[([AB])\]\]"})
        system = server.bodies[-1]["messages"][0]["content"]
    _assert_longer_recovered(card)
    # prompt_v2: implicit concatenation of literals, named by the dict's system_prompt
    assert system.startswith("Please act as an impartial judge")
    assert system.endswith('"[[B]]" if assistant B is better.')


def test_reward_bench_prometheus_prompt_with_its_own_names_mapped(tmp_path, small_corpus):
    def read(_: str, user: str) -> tuple[str, str]:
        return (_between(user, "###Response A:\n", "\n\n###Response B:"),
                _between(user, "###Response B:\n", "\n\n###Score"))

    with ToolJudge(read, lambda first, a, b: f"Feedback: one is longer. [RESULT] {'A' if first else 'B'}") as server:
        card = _audit(tmp_path, server, small_corpus,
                      prompt={"file": str(REWARD / "generative.py"), "name": "RELATIVE_PROMPT",
                              "fields": {"orig_instruction": "question", "response_A": "answer_a",
                                         "response_B": "answer_b"},
                              "vars": {"score_rubric": "Which response answers {question} better?"}},
                      verdict={"pattern": r"\[RESULT\]\s*\(?([AB])\)?"})
        user = server.bodies[-1]["messages"][0]["content"]
    _assert_longer_recovered(card)
    assert "###Score Rubric:\nWhich response answers " in user


PHOENIX = FIXTURES / "phoenix" / "CORRECTNESS_CLASSIFICATION_EVALUATOR_CONFIG.yaml"


def test_phoenix_eval_config_messages_and_label_scores(tmp_path, small_corpus):
    def label(first: bool, a: str, b: str) -> str:
        return f"The output is {'correct' if len(a) > 300 else 'incorrect'}."

    read = lambda _, user: (_between(user, "<output>\n", "\n</output>"), "")  # noqa: E731
    with ToolJudge(read, label) as server:
        card = _pointwise_card(tmp_path, server, small_corpus,
                               prompt={"file": str(PHOENIX)},
                               verdict={"pattern": r"\b(correct|incorrect)\b", "labels": {"correct": 1, "incorrect": 0},
                                        "scale": [0, 1]})
    assert card["verbosity_gain"]["value"] > 0 and card["invalid_rate"]["value"] == 0

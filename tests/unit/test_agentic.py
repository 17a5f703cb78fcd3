"""Agent trajectories: loaders, the nine perturbations, both focus modes, the judge prompt, the
manifest, and a mixed simulated audit whose agentic card recovers the judges' known biases."""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter

import msgspec
import pytest

from babelrun import agentic, manifest
from babelrun.agentic import serialise, trajectory
from babelrun.agentic.perturb import AGENTIC_PERTURBATIONS, corrupt_value
from babelrun.core import items
from babelrun.errors import ManifestError
from babelrun.judges import judge_id, judge_spec, with_options
from babelrun.plan import Plan
from helpers import request, simulated, write_manifest

BUNDLED = list(agentic.bundled())
SEVERITIES = [0.3, 0.6, 1.0]


def _bundled_lines() -> list[dict]:
    from importlib import resources

    folder = resources.files("babelrun.agentic") / "bundled"
    return [json.loads(line) for f in sorted(folder.iterdir(), key=lambda f: f.name) if f.name.endswith(".jsonl")
            for line in f.read_bytes().splitlines() if line.strip()]


# ---- the bundled set and the loaders -------------------------------------------------------


def test_bundled_set_meets_the_format():
    assert len({t.lang for t in BUNDLED}) >= 4
    assert len({t.traj_id for t in BUNDLED}) == len(BUNDLED)
    for t in BUNDLED:
        assert 2 <= len(t.steps) <= 8, t.traj_id
        used = {c.name for s in t.steps for c in s.calls}
        defined = {tool.name for tool in t.tools}
        assert used <= defined and len(defined) >= 2 and defined - used, t.traj_id
        assert all(tool.required for tool in t.tools), t.traj_id
        assert all(len(s.results) == len(s.calls) for s in t.steps), t.traj_id
        assert t.final_answer and t.task


def _semantic(record: dict) -> dict:
    """A chat record without call ids, with arguments parsed: what a trajectory means."""
    ids = {}
    messages = []
    for m in record["messages"]:
        m = dict(m)
        if m.get("tool_calls"):
            calls = []
            for c in m["tool_calls"]:
                ids[c["id"]] = len(ids)
                calls.append((c["function"]["name"], json.loads(c["function"]["arguments"])))
            m["tool_calls"] = calls
        if "tool_call_id" in m:
            m["tool_call_id"] = ids[m["tool_call_id"]]
        messages.append(m)
    return {**record, "messages": messages}


def test_openai_chat_round_trip():
    lines = _bundled_lines()
    assert len(lines) == len(BUNDLED)
    for line in lines:
        traj = next(trajectory.read_lines(json.dumps(line).encode(), "openai_chat"))
        written = trajectory.to_openai_chat(traj)
        again = next(trajectory.read_lines(msgspec.json.encode(written), "openai_chat"))
        assert again == traj
        assert _semantic(written) == _semantic(line)  # call ids renumbered, nothing else changed


def test_openai_chat_content_parts_and_thoughts_between_calls():
    line = _bundled_lines()[0]
    messages = [dict(m) for m in line["messages"]]
    user = next(i for i, m in enumerate(messages) if m["role"] == "user")
    task = messages[user]["content"]
    messages[user]["content"] = [{"type": "text", "text": task[:10]}, {"type": "image_url"},
                                 {"type": "text", "text": task[10:]}]
    first_call = next(i for i, m in enumerate(messages) if m.get("tool_calls"))
    messages.insert(first_call, {"role": "assistant", "content": "Thinking first."})
    traj = next(trajectory.read_lines(json.dumps({**line, "messages": messages}).encode(), "openai_chat"))
    plain = next(trajectory.read_lines(json.dumps(line).encode(), "openai_chat"))
    assert traj.task == plain.task
    assert traj.steps[0].thought == ("Thinking first.\n" + plain.steps[0].thought).strip()
    assert traj.steps[1:] == plain.steps[1:]


def test_openai_chat_loader_refuses_what_it_cannot_represent():
    base = {"id": "x", "lang": "en", "messages": [{"role": "user", "content": "t"}]}
    orphan = {**base, "messages": [*base["messages"], {"role": "tool", "tool_call_id": "c9", "content": "{}"}]}
    bad_args = {**base, "messages": [*base["messages"], {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]}]}
    no_task = {**base, "messages": [{"role": "system", "content": "s"}]}
    for row, words in ((orphan, "unknown call"), (bad_args, "not JSON"), (no_task, "no user message")):
        data = b"\n" + json.dumps(row).encode()
        with pytest.raises(trajectory.TrajectoryError, match=f"line 2: .*{words}"):
            list(trajectory.read_lines(data, "openai_chat"))


def test_openai_chat_multi_turn_and_without_id():
    # The last user turn is the task judged; the turns before it are its context, and the
    # earlier tool calls are not steps. Without an id, a stable one from the content.
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "a"}'}}
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "What is A?"},
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "A is 1"},
                {"role": "assistant", "content": "A is 1."},
                {"role": "user", "content": "And B?"},
                {"role": "assistant", "content": "", "tool_calls": [{**call, "id": "c2", "function": {
                    "name": "lookup", "arguments": '{"q": "b"}'}}]},
                {"role": "tool", "tool_call_id": "c2", "content": "B is 2"},
                {"role": "assistant", "content": "B is 2."}]
    row = {"lang": "en", "messages": messages}
    traj = next(trajectory.read_lines(json.dumps(row).encode(), "openai_chat"))
    assert traj.task == "user: What is A?\nassistant: [called lookup]\ntool: A is 1\nassistant: A is 1.\n\nAnd B?"
    assert [c.arguments for s in traj.steps for c in s.calls] == [{"q": "b"}]
    assert traj.final_answer == "B is 2." and traj.system == "Be brief."
    again = next(trajectory.read_lines(b"\n" + json.dumps(row, indent=None).encode(), "openai_chat"))
    assert traj.traj_id == again.traj_id and traj.traj_id.startswith("chat-")
    other = next(trajectory.read_lines(json.dumps({**row, "messages": messages[:-1] + [
        {"role": "assistant", "content": "B is two."}]}).encode(), "openai_chat"))
    assert other.traj_id != traj.traj_id


BFCL_QUESTION = {
    "id": "multiple_7",
    "question": [[{"role": "user", "content": "Find the area of a triangle with base 10 and height 5."}]],
    "function": [
        {"name": "calc_area", "description": "Triangle area.", "parameters": {"type": "dict", "properties": {
            "base": {"type": "integer"}, "height": {"type": "integer"}, "unit": {"type": "string"}},
            "required": ["base", "height"]}},
        {"name": "calc_perimeter", "description": "Perimeter.", "parameters": {"type": "dict", "properties": {
            "sides": {"type": "array", "items": {"type": "float"}}}, "required": ["sides"]}},
    ],
}


def test_bfcl_possible_answers_and_literal_answers(tmp_path):
    answers = tmp_path / "possible_answer.json"
    answers.write_text(json.dumps({"id": "multiple_7", "ground_truth": [
        {"calc_area": {"base": [10], "height": [5], "unit": ["", "units"]}},
        {"calc_perimeter": {"sides": [[3.0, 4.0, 5.0]]}}]}) + "\n")
    traj = next(trajectory.read_lines(json.dumps(BFCL_QUESTION).encode(), "bfcl", "en", answers))
    assert traj.task.startswith("Find the area") and traj.domain == "multiple" and traj.lang == "en"
    assert [t.required for t in traj.tools] == [["base", "height"], ["sides"]]
    # The first acceptable value; "" (may be omitted) leaves the argument out.
    assert [c for s in traj.steps for c in s.calls] == [
        trajectory.ToolCall("calc_area", {"base": 10, "height": 5}),
        trajectory.ToolCall("calc_perimeter", {"sides": [3.0, 4.0, 5.0]})]
    literal = {**BFCL_QUESTION, "question": "q", "answer": [{"calc_area": {"base": 10, "height": 5, "unit": "cm"}}]}
    traj = next(trajectory.read_lines(json.dumps(literal).encode(), "bfcl", "de"))
    assert traj.steps[0].calls[0].arguments == {"base": 10, "height": 5, "unit": "cm"} and traj.lang == "de"
    assert traj.steps[0].results == [] and traj.final_answer == ""


# ---- perturbations and serialisation -------------------------------------------------------


def test_every_perturbation_changes_the_trace_in_both_focus_modes_or_is_counted():
    for focus in agentic.FOCUSES:
        plan = Plan([], [], 5, trajectories=BUNDLED, agentic_spec=manifest.AgenticSpec(
            focus=focus, perturbations=[manifest.PerturbationSpec(name=n, severities=SEVERITIES)
                                        for n in AGENTIC_PERTURBATIONS]))
        emitted = Counter()
        texts = Counter()
        for item in plan.items():
            texts[(item.ref_id, item.perturbation, "".join(item.perturbed.split()))] += 1
            assert item.kind == "agentic" and item.perturbation.startswith("agent:")
            assert not items._same_text(item.reference, item.perturbed), item.item_id
            assert (item.ref_len, item.pert_len) == (len(item.reference), len(item.perturbed))
            emitted[item.perturbation] += 1
        audit = plan.audit
        for name in AGENTIC_PERTURBATIONS:
            rows = [r for r in audit if r.perturbation == "agent:" + name]
            assert sum(r.emitted for r in rows) == emitted["agent:" + name]
            assert sum(r.emitted + r.skipped + r.merged for r in rows) == len(BUNDLED) * len(SEVERITIES)
            # On the bundled set every perturbation acts (its trajectories are built for it).
            assert sum(r.skipped for r in rows) <= len(BUNDLED) * len(SEVERITIES) // 10, name
        # Severities that gave one trajectory the same text are one item, the merges counted
        # (early termination of a short trajectory at 0.6 and 1.0 keeps the same first step).
        assert set(texts.values()) == {1}
        assert sum(r.merged for r in audit) > 0


def test_a_perturbation_the_focus_cannot_show_is_skipped_and_counted():
    # No tool with a required argument: missing_required_arg has nothing to drop.
    free = msgspec.structs.replace(BUNDLED[0],
                                   tools=[msgspec.structs.replace(t, required=[]) for t in BUNDLED[0].tools])
    plan = Plan([], [], 0, trajectories=[free], agentic_spec=manifest.AgenticSpec(
        focus="tool_calls", perturbations=[manifest.PerturbationSpec(name="missing_required_arg")]))
    assert plan.n_items == 0
    assert [(r.perturbation, r.emitted, r.skipped) for r in plan.audit] == [
        ("agent:missing_required_arg", 0, 1), ("agent:missing_required_arg", 0, 1)]


def test_the_no_op_guard_sees_what_the_focus_shows(monkeypatch):
    # A change to thoughts only: visible in full_trace, invisible in tool_calls.
    def reword(traj, severity, rng):
        return msgspec.structs.replace(traj, steps=[msgspec.structs.replace(s, thought=s.thought + " Hmm.")
                                                    for s in traj.steps])

    monkeypatch.setitem(AGENTIC_PERTURBATIONS, "reword", reword)
    spec = [manifest.PerturbationSpec(name="reword", severities=[0.5])]
    counts = {focus: [(r.emitted, r.skipped) for r in Plan([], [], 0, trajectories=BUNDLED[:3], agentic_spec=
                      manifest.AgenticSpec(focus=focus, perturbations=spec)).audit] for focus in agentic.FOCUSES}
    assert counts == {"full_trace": [(3, 0)], "tool_calls": [(0, 3)]}


def test_perturbations_are_type_correct_and_do_what_they_say():
    rng = random.Random(3)
    assert corrupt_value(True, {}, rng) is False
    assert corrupt_value("metric", {"enum": ["metric", "imperial"]}, rng) == "imperial"
    for _ in range(50):
        v = corrupt_value(3, {"minimum": 1, "maximum": 7}, rng)
        assert type(v) is int and v != 3 and 1 <= v <= 7
        f = corrupt_value(21.5, {}, rng)
        assert type(f) is float and f != 21.5
    assert corrupt_value("Lisbon", {}, rng, ["Porto", "Lisbon"]) == "Porto"
    assert corrupt_value("2024-05-01", {}, rng) != "2024-05-01"

    for traj in BUNDLED:
        defined = {t.name for t in traj.tools}
        names = lambda t: [c.name for s in t.steps for c in s.calls]  # noqa: E731
        for seed in range(5):
            r = random.Random(seed)
            assert set(names(AGENTIC_PERTURBATIONS["tool_name_swap"](traj, 0.3, r))) <= defined
            invented = set(names(AGENTIC_PERTURBATIONS["hallucinated_tool"](traj, 0.3, r))) - defined
            assert len(invented) >= 1
            padded = AGENTIC_PERTURBATIONS["step_pad"](traj, 0.3, r)
            assert len(padded.steps) > len(traj.steps) and padded.final_answer == traj.final_answer
            dropped = AGENTIC_PERTURBATIONS["drop_intermediate_step"](traj, 0.3, r)
            assert dropped.steps[-1] == traj.steps[-1] and len(dropped.steps) < len(traj.steps)
            ended = AGENTIC_PERTURBATIONS["early_termination"](traj, 0.3, r)
            assert ended.steps == traj.steps[: len(ended.steps)] and ended.final_answer != traj.final_answer
            missing = AGENTIC_PERTURBATIONS["missing_required_arg"](traj, 1.0, r)
            assert all(set(c.arguments) < set(o.arguments) for s, so in zip(missing.steps, traj.steps, strict=True)
                       for c, o in zip(s.calls, so.calls, strict=True) if traj.tool(o.name).required)
            extra = AGENTIC_PERTURBATIONS["extra_spurious_arg"](traj, 1.0, r)
            assert all(set(c.arguments) - set(traj.tool(c.name).properties) for s in extra.steps for c in s.calls)
            corrupted = AGENTIC_PERTURBATIONS["argument_corrupt"](traj, 1.0, r)
            for s, so in zip(corrupted.steps, traj.steps, strict=True):
                for c, o in zip(s.calls, so.calls, strict=True):
                    assert c.arguments.keys() == o.arguments.keys()
                    for k, v in c.arguments.items():
                        assert type(v) is type(o.arguments[k]), (traj.traj_id, k, v)


def test_focus_modes_show_what_they_promise():
    traj = BUNDLED[0]
    compact, full = serialise.tool_calls(traj), serialise.full_trace(traj)
    thought = traj.steps[0].thought
    assert thought in full and thought not in compact
    for text in (compact, full):
        assert traj.final_answer in text and traj.steps[0].results[0] in text
        assert traj.steps[0].calls[0].name + "(" in text
    prompt = serialise.task_prompt(traj)
    assert prompt.startswith(traj.task) and all(f"- {t.name}(" in prompt for t in traj.tools)


# ---- the judge prompt ----------------------------------------------------------------------


def test_rendered_prompt_holds_the_two_trajectories_in_slots_a_and_b():
    plan = Plan([], [], 0, trajectories=BUNDLED[:1], agentic_spec=manifest.AgenticSpec(
        perturbations=[manifest.PerturbationSpec(name="hallucinated_tool", severities=[0.5])]))
    (item,) = plan.items()
    assert item.reference == serialise.full_trace(BUNDLED[0])
    for order, (a, b) in (("ref_first", (item.reference, item.perturbed)),
                          ("pert_first", (item.perturbed, item.reference))):
        user = request(item, order).messages[1]["content"]
        question = user.split("[Answer A]")[0]
        assert f"[Answer A]\n{a}\n[End of Answer A]" in user
        assert f"[Answer B]\n{b}\n[End of Answer B]" in user
        # The question holds the task and the tool list, never a trajectory.
        assert BUNDLED[0].task in question and "Final answer:" not in question
        assert all(t.name in question for t in BUNDLED[0].tools)


# ---- identity ------------------------------------------------------------------------------


def test_text_item_ids_and_judge_ids_are_unchanged():
    ref = items.Reference("en", "r1", "Q?", "One. Two.")
    old = hashlib.blake2b("\x1f".join(("text", "en", "r1", "Q?", "One. Two.", "truncate", "0.3", "0")).encode(),
                          digest_size=10).hexdigest()
    assert items.item_id("text", ref, "truncate", 0.3, 0) == old
    # Ids recorded before accuracy_by_perturbation existed (main at dd13c33).
    assert judge_id(judge_spec(name="a", backend="simulated")) == "1c26589dc543"
    knobs = manifest.SimulatedKnobs(default_accuracy=0.7, accuracy={"sw": 0.6}, position_bias=0.3)
    spec = judge_spec(name="b", backend="simulated", simulated=knobs)
    assert judge_id(spec) == "bd81bcd11d1f"
    blind = msgspec.structs.replace(knobs, accuracy_by_perturbation={"hallucinated_tool": 0.5})
    assert judge_id(with_options(spec, simulated=blind)) != "bd81bcd11d1f"


def test_the_focus_is_part_of_the_item_id():
    ids = {f: {i.item_id for i in Plan([], [], 0, trajectories=BUNDLED[:1],
                                       agentic_spec=manifest.AgenticSpec(focus=f)).items()} for f in agentic.FOCUSES}
    assert ids["tool_calls"] and not ids["tool_calls"] & ids["full_trace"]


# ---- the manifest --------------------------------------------------------------------------

BASE = "name: t\noutput_dir: out\njudges:\n  - {name: j, backend: simulated}\n"
TRAJ = BASE + "corpus: {sources: [{kind: trajectories}]}\n"


@pytest.mark.parametrize(("text", "path", "words"), [
    (BASE + "agentic: {focus: full_trace}\n", "agentic", "kind: trajectories"),
    (TRAJ + "agentic: {focus: everything}\n", "agentic.focus", "invalid enum value"),
    (TRAJ + "agentic: {perturbations: [{name: step_pad}, {name: truncate}]}\n", "agentic.perturbations[1].name",
     "unknown perturbation"),
    (TRAJ + "agentic: {perturbations: [{name: step_pad, severities: [0]}]}\n",
     "agentic.perturbations[0].severities[0]", "> 0.0"),
    (BASE + "corpus: {sources: [{kind: trajectories, path: none.jsonl}]}\n",
     "corpus.sources[0].path", "file not found"),
    (BASE + "corpus: {sources: [{kind: trajectories, format: csv}]}\n", "corpus.sources[0].format", "invalid enum"),
    (BASE + "corpus: {sources: [{kind: trajectories, format: bfcl, language: en, answers: a.json, path: q.json}]}\n",
     "corpus.sources[0].answers", "file not found"),
    (BASE + "corpus: {sources: [{kind: trajectories, path: bad.jsonl}]}\n", "corpus.sources[0].path", "line 2"),
    (BASE + "corpus: {sources: [{kind: trajectories, path: bad.jsonl, language: xx}]}\n",
     "corpus.sources[0].language", "'xx' is not"),
    (TRAJ.replace("backend: simulated",
                  "backend: simulated, simulated: {accuracy_by_perturbation: {agent:sleep: 0.5}}"),
     "judges[0].simulated.accuracy_by_perturbation.agent:sleep", "unknown perturbation"),
    (TRAJ.replace("backend: simulated", "backend: simulated, simulated: {accuracy_by_perturbation: {step_pad: 2}}"),
     "judges[0].simulated.accuracy_by_perturbation.step_pad", "probability"),
    (BASE + "corpus: {sources: [{kind: trajectories}], languages: [en, de]}\n", "corpus.languages[1]",
     "not in the corpus"),
])
def test_manifest_errors_name_their_field(tmp_path, text, path, words):
    (tmp_path / "q.json").write_text(json.dumps(BFCL_QUESTION) + "\n")
    (tmp_path / "bad.jsonl").write_text(json.dumps(_bundled_lines()[0]) + "\n{\"id\": 1}\n")
    file = tmp_path / "m.yaml"
    file.write_text(text)
    with pytest.raises(ManifestError) as info:
        manifest.load(file, environ={})
    assert info.value.path == path and words in info.value.problem, info.value


def test_old_manifests_mean_what_they_meant(tmp_path, small_corpus):
    path = write_manifest(tmp_path, [simulated()], corpus=small_corpus)
    m = manifest.load(path, environ={})
    assert m.agentic is None
    plan = Plan.from_manifest(m)
    assert plan.trajectories == [] and all(i.kind == "text" for i in plan.items())


def test_trajectory_sources_sample_per_language_and_bfcl_files_load(tmp_path):
    (tmp_path / "q.json").write_text(json.dumps(BFCL_QUESTION | {"answer": [{"calc_area": {"base": 1, "height": 2}}]}))
    path = write_manifest(tmp_path, [simulated()], corpus={
        "sources": [{"kind": "trajectories"}, {"kind": "trajectories", "path": "q.json", "format": "bfcl",
                                                "language": "en"}],
        "languages": ["en", "es"], "references_per_language": 9},
        agentic={"focus": "tool_calls", "perturbations": [{"name": "step_pad", "severities": [0.5]},
                                                          {"name": "corrupt_tool_result", "severities": [0.5]}]})
    plan = Plan.from_manifest(manifest.load(path, environ={}))
    bundled = Counter(t.lang for t in BUNDLED)
    assert Counter(t.lang for t in plan.trajectories) == {"en": bundled["en"] + 1, "es": bundled["es"]}
    assert {i.perturbation for i in plan.items()} == {"agent:step_pad", "agent:corrupt_tool_result"}
    # The BFCL line has no results to corrupt: skipped and counted, never emitted.
    corrupt = {r.lang: (r.emitted, r.skipped) for r in plan.audit if r.perturbation == "agent:corrupt_tool_result"}
    assert corrupt == {"en": (bundled["en"], 1), "es": (bundled["es"], 0)}


# ---- a mixed audit -------------------------------------------------------------------------
# Enough severities for about 200 items per perturbation, however many trajectories are bundled.

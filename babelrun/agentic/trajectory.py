"""Agent trajectories: the typed model and its two loaders.

A ``Trajectory`` is a task, the tools the agent was given (name, description, JSON Schema of
the parameters, required arguments), its steps (a thought, the tool calls it made and their
results) and its final answer. Two source formats:

OpenAI chat (``format: openai_chat``), one JSON object per line::

    {"id", "lang", "domain", "tools": [{"type": "function", "function": {name, description,
     parameters}}], "messages": [system?, user (the task), assistant (thought + tool_calls),
     tool (a result per call, matched by tool_call_id), …, assistant (the final answer)]}

``arguments`` are JSON strings, as in the API; a ``content`` may be a string or the API's list
of parts (its text parts are joined). An assistant message without tool calls
before the last one is a thought carried into the next step. ``id`` is optional: without
one, the trajectory's id is a hash of its content (``chat-`` + 16 hex digits of its messages
and tools), stable across files and runs. Multi-turn conversations: the last user message is
the task judged, and the turns before it are its context (``user: …`` / ``assistant: …``
lines, tool calls by name, above the task); the steps are those after the last user message.
``to_openai_chat`` writes a trajectory back; call ids are renumbered (``call_1``, …), so a
load → write → load round trip gives an equal ``Trajectory``.

BFCL (``format: bfcl``), the Berkeley Function-Calling Leaderboard's question files, one
object per line: ``{"id", "question", "function", "ground_truth" | "answer"}``. ``question``
is a string or BFCL v3's nested list of chat turns (the first user turn is the task);
``function`` is one definition or a list (BFCL's ``"type": "dict"`` schemas accepted);
``ground_truth`` follows BFCL's possible-answer files — a list of ``{tool: {arg: [acceptable
values]}}``, the first acceptable value is taken and ``""`` (BFCL's "may be omitted") leaves
the argument out — while ``answer`` holds literal values (``{tool: {arg: value}}``). When the
answers are in BFCL's separate possible-answer file, the source's ``answers:`` names it (joined
by ``id``). Each call is one step with no thought and no result; there is no final answer.
``lang`` / ``domain`` fields are optional (the source's ``language``, and the id's category).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec


class ToolDef(msgspec.Struct, frozen=True):
    name: str
    description: str
    parameters: dict[str, Any]  # the JSON Schema of the arguments, as given
    required: list[str]

    @property
    def properties(self) -> dict[str, Any]:
        return self.parameters.get("properties", {})


class ToolCall(msgspec.Struct, frozen=True):
    name: str
    arguments: dict[str, Any]


class Step(msgspec.Struct, frozen=True):
    thought: str
    calls: list[ToolCall]
    results: list[str]  # results[i] is what calls[i] returned; empty when none was recorded


class Trajectory(msgspec.Struct, frozen=True):
    traj_id: str
    lang: str
    domain: str
    task: str
    tools: list[ToolDef]
    steps: list[Step]
    final_answer: str
    system: str = ""  # the agent's system message, kept for the round trip

    def tool(self, name: str) -> ToolDef | None:
        return next((t for t in self.tools if t.name == name), None)


class TrajectoryError(ValueError):
    """A line that is not a trajectory in the declared format; the message says why."""


# ---- OpenAI chat ---------------------------------------------------------------------------


class _Function(msgspec.Struct):
    name: str
    arguments: str


class _Call(msgspec.Struct):
    id: str
    function: _Function
    type: str = "function"


class _Part(msgspec.Struct):
    type: str
    text: str = ""


class _Message(msgspec.Struct):
    role: str
    content: str | list[_Part] | None = None  # a string, or the API's list of content parts
    tool_calls: list[_Call] = []
    tool_call_id: str | None = None


class _ToolFunction(msgspec.Struct):
    name: str
    parameters: dict[str, Any] = {}
    description: str = ""


class _Tool(msgspec.Struct):
    function: _ToolFunction
    type: str = "function"


class _ChatRow(msgspec.Struct):
    messages: list[_Message]
    id: str = ""
    tools: list[_Tool] = []
    lang: str = ""
    domain: str = ""


def _tool_def(name: str, description: str, parameters: dict[str, Any]) -> ToolDef:
    return ToolDef(name, description, parameters, list(parameters.get("required", [])))


def _arguments(text: str, where: str) -> dict[str, Any]:
    try:
        value = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as e:
        raise TrajectoryError(f"{where}: arguments are not JSON ({e.msg})") from None
    except RecursionError:
        raise TrajectoryError(f"{where}: arguments are not JSON (nested too deeply)") from None
    if not isinstance(value, dict):
        raise TrajectoryError(f"{where}: arguments must be a JSON object")
    return value


def _text(content: str | list[_Part] | None) -> str:
    """A message's text: its string, or its text parts joined (other parts ignored)."""
    if isinstance(content, list):
        return "".join(p.text for p in content if p.type == "text")
    return content or ""


def from_openai_chat(row: _ChatRow, lang: str) -> Trajectory:
    """One chat transcript as a trajectory (see the module docstring for the accepted shape)."""
    system, task, final, thought = "", None, "", []
    steps: list[Step] = []
    pending: dict[str, int] = {}  # tool_call_id -> index in the last step's calls
    results: list[str | None] = []
    messages = row.messages
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    context = _context(messages[:last_user])
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if m.role == "system":
            system = _text(m.content)
        elif i < last_user:
            continue  # an earlier turn: context of the task, not a step
        elif m.role == "user":
            task = "\n\n".join(filter(None, (context, _text(m.content))))
        elif m.role == "assistant" and m.tool_calls:
            _close(steps, results, where)
            calls = [ToolCall(c.function.name, _arguments(c.function.arguments, f"{where}.tool_calls[{k}]"))
                     for k, c in enumerate(m.tool_calls)]
            pending = {c.id: k for k, c in enumerate(m.tool_calls)}
            results = [None] * len(calls)
            steps.append(Step("\n".join([*thought, _text(m.content)]).strip(), calls, []))
            thought = []
        elif m.role == "assistant":
            if i == len(messages) - 1:
                final = _text(m.content)
            else:
                thought.append(_text(m.content))
        elif m.role == "tool":
            if m.tool_call_id not in pending:
                raise TrajectoryError(f"{where}: tool result for unknown call {m.tool_call_id!r}")
            results[pending.pop(m.tool_call_id)] = _text(m.content)
        else:
            raise TrajectoryError(f"{where}: unknown role {m.role!r}")
    _close(steps, results, f"messages[{len(messages)}]")
    if task is None:
        raise TrajectoryError("no user message (the task)")
    tools = [_tool_def(t.function.name, t.function.description, t.function.parameters) for t in row.tools]
    return Trajectory(row.id or _content_id(row), row.lang or lang, row.domain, task, tools, steps, final, system)


def _context(earlier: list[_Message]) -> str:
    """The turns before the task, one line each (system messages are kept apart)."""
    lines = []
    for m in earlier:
        if m.role == "system":
            continue
        calls = ", ".join(c.function.name for c in m.tool_calls)
        text = " ".join(filter(None, (_text(m.content), f"[called {calls}]" if calls else "")))
        lines.append(f"{m.role}: {text}".rstrip())
    return "\n".join(lines)


def _content_id(row: _ChatRow) -> str:
    """A stable id for a transcript that has none: a hash of its messages and tools."""
    import hashlib

    body = msgspec.json.encode([row.messages, row.tools])
    return "chat-" + hashlib.blake2b(body, digest_size=8).hexdigest()


def _close(steps: list[Step], results: list[str | None], where: str) -> None:
    """Attach the collected results to the last step: one per call, or none at all."""
    if not steps or steps[-1].results:
        return
    if all(r is None for r in results):
        return
    if any(r is None for r in results):
        raise TrajectoryError(f"{where}: a tool call of the step before has no result")
    steps[-1] = msgspec.structs.replace(steps[-1], results=list(results))
    results.clear()


def to_openai_chat(traj: Trajectory) -> dict[str, Any]:
    """The trajectory as an OpenAI chat record (the input format of ``from_openai_chat``)."""
    messages: list[dict[str, Any]] = []
    if traj.system:
        messages.append({"role": "system", "content": traj.system})
    messages.append({"role": "user", "content": traj.task})
    n = 0
    for step in traj.steps:
        ids = [f"call_{n + k + 1}" for k in range(len(step.calls))]
        n += len(step.calls)
        messages.append({"role": "assistant", "content": step.thought, "tool_calls": [
            {"id": cid, "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
            for cid, c in zip(ids, step.calls, strict=True)]})
        messages += [{"role": "tool", "tool_call_id": cid, "content": r}
                     for cid, r in zip(ids, step.results, strict=False)]
    messages.append({"role": "assistant", "content": traj.final_answer})
    tools = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                               "parameters": t.parameters}} for t in traj.tools]
    return {"id": traj.traj_id, "lang": traj.lang, "domain": traj.domain, "tools": tools, "messages": messages}


# ---- BFCL ----------------------------------------------------------------------------------


class _BfclRow(msgspec.Struct):
    id: str
    question: Any
    function: Any
    ground_truth: list[dict[str, dict[str, Any]]] | None = None
    answer: list[dict[str, dict[str, Any]]] | None = None
    lang: str = ""
    domain: str = ""


def _bfcl_task(question: Any) -> str:
    if isinstance(question, str):
        return question
    turns = question
    while isinstance(turns, list) and turns and isinstance(turns[0], list):
        turns = turns[0]  # BFCL v3: a list of turns, each a list of messages
    for m in turns if isinstance(turns, list) else []:
        if isinstance(m, dict) and m.get("role") == "user":
            return str(m.get("content", ""))
    raise TrajectoryError("question: no user turn")


def _first_acceptable(options: Any) -> tuple[bool, Any]:
    """BFCL's possible answers: (present, value) — the first acceptable value, where ``""``
    means the argument may be omitted (so it is)."""
    if not isinstance(options, list):
        return True, options
    if not options or options[0] == "":
        return False, None
    return True, options[0]


def from_bfcl(row: _BfclRow, lang: str, answers: dict[str, list] | None = None) -> Trajectory:
    functions = row.function if isinstance(row.function, list) else [row.function]
    tools = [_tool_def(f["name"], f.get("description", ""), f.get("parameters", {})) for f in functions]
    literal = row.answer is not None
    calls_raw = row.answer if literal else (row.ground_truth or (answers or {}).get(row.id))
    if calls_raw is None:
        raise TrajectoryError("no ground_truth or answer (and none in the answers file)")
    steps = []
    for call in calls_raw:
        for name, args in call.items():
            if literal:
                arguments = dict(args)
            else:
                picked = {k: _first_acceptable(v) for k, v in args.items()}
                arguments = {k: v for k, (present, v) in picked.items() if present}
            steps.append(Step("", [ToolCall(name, arguments)], []))
    domain = row.domain or row.id.rsplit("_", 1)[0]
    return Trajectory(row.id, row.lang or lang, domain, _bfcl_task(row.question), tools, steps, "")


def _answers_file(path: Path) -> dict[str, list]:
    out = {}
    for n, line in enumerate(path.read_bytes().splitlines(), 1):
        if line.strip():
            try:
                row = json.loads(line)
                out[row["id"]] = row["ground_truth"]
            except (ValueError, KeyError, TypeError, RecursionError) as e:
                raise TrajectoryError(f"{path}: line {n}: not a BFCL possible answer ({e})") from None
    return out


# ---- files ---------------------------------------------------------------------------------


def read_lines(data: bytes, fmt: str, lang: str = "", answers: Path | None = None,
               source: str = "") -> Iterator[Trajectory]:
    """Decode a JSON Lines file of trajectories in ``fmt``; errors name the line."""
    row_type = _ChatRow if fmt == "openai_chat" else _BfclRow
    decoder = msgspec.json.Decoder(row_type)
    joined = _answers_file(answers) if answers else None
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = decoder.decode(line)
            traj = from_openai_chat(row, lang) if fmt == "openai_chat" else from_bfcl(row, lang, joined)
        except (msgspec.DecodeError, TrajectoryError, KeyError, TypeError, RecursionError) as e:
            article = "an" if fmt[0] in "aeiou" else "a"
            raise TrajectoryError(f"{source}line {n}: not {article} {fmt} trajectory ({e})") from None
        if not traj.lang:
            raise TrajectoryError(f"{source}line {n}: no language (a lang field, or the source's language:)")
        yield traj

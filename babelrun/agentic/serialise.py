"""A trajectory as the text a judge reads, in one of two focus modes.

``tool_calls``: the compact call sequence, each call with its result, then the final answer::

    1. get_weather({"city": "Lisbon", "units": "metric"})
       -> {"temp_c": 21.5}
    Final answer: …

``full_trace``: every step's thought, actions and observations, then the final answer::

    Step 1
    Thought: …
    Action: get_weather({"city": "Lisbon", "units": "metric"})
    Observation: {"temp_c": 21.5}

    Final answer: …

Arguments are written as JSON in their given key order (non-ASCII kept as is). The labels
are English, like the tool names and argument keys. The item's prompt (``task_prompt``)
holds the task and the tool definitions, so a judge can tell a call to a tool it was never
given.
"""

from __future__ import annotations

import json
from typing import Literal

from .trajectory import ToolCall, ToolDef, Trajectory

Focus = Literal["tool_calls", "full_trace"]
FOCUSES: tuple[Focus, Focus] = ("tool_calls", "full_trace")


def _call(call: ToolCall) -> str:
    return f"{call.name}({json.dumps(call.arguments, ensure_ascii=False)})"


def tool_calls(traj: Trajectory) -> str:
    lines, n = [], 0
    for step in traj.steps:
        for k, call in enumerate(step.calls):
            n += 1
            lines.append(f"{n}. {_call(call)}")
            if k < len(step.results):
                lines.append(f"   -> {step.results[k]}")
    lines.append(f"Final answer: {traj.final_answer}")
    return "\n".join(lines)


def full_trace(traj: Trajectory) -> str:
    blocks = []
    for i, step in enumerate(traj.steps, 1):
        lines = [f"Step {i}"]
        if step.thought:
            lines.append(f"Thought: {step.thought}")
        for k, call in enumerate(step.calls):
            lines.append(f"Action: {_call(call)}")
            if k < len(step.results):
                lines.append(f"Observation: {step.results[k]}")
        blocks.append("\n".join(lines))
    blocks.append(f"Final answer: {traj.final_answer}")
    return "\n\n".join(blocks)


SERIALISERS = {"tool_calls": tool_calls, "full_trace": full_trace}


def serialise(traj: Trajectory, focus: Focus) -> str:
    return SERIALISERS[focus](traj)


def _signature(tool: ToolDef) -> str:
    params = []
    for name, schema in tool.properties.items():
        kind = schema.get("type", "any") if isinstance(schema, dict) else "any"
        if isinstance(schema, dict) and "enum" in schema:
            kind = " | ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
        params.append(f"{name}{'' if name in tool.required else '?'}: {kind}")
    return f"- {tool.name}({', '.join(params)}): {tool.description}"


def task_prompt(traj: Trajectory) -> str:
    """The item's prompt: the task, then the tools the agent was given (``?`` marks an
    optional argument)."""
    tools = "\n".join(_signature(t) for t in traj.tools)
    return f"{traj.task}\n\n[Tools available to the agent]\n{tools}"

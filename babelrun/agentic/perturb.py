"""Nine controlled degradations of a reference trajectory, as pure functions.

Each is ``(trajectory, severity, rng) -> trajectory``, deterministic given the
``random.Random`` the item builder seeds from the item id, like the text perturbations. They
return the trajectory unchanged when there is nothing to act on (no required argument to drop,
a single step to cut, …); the item builder compares the *serialised* traces in the run's focus
and skips and counts such an item.

Severity *s* is the fraction of the candidates acted on (at least one): calls, arguments,
results or steps, as each docstring says. Changes are type-correct: a boolean flips, an
integer stays an integer (within the schema's minimum / maximum), a number keeps its decimals,
an enum takes another of its values, a string takes another value the same argument has
elsewhere in the trajectory, else a nudged number inside it, else loses a word, else gets a
transposition typo.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Callable
from typing import Any

import msgspec

from ..perturb.text import share
from .trajectory import Step, ToolCall, Trajectory

AgenticPerturbation = Callable[[Trajectory, float, random.Random], Trajectory]
Site = tuple[int, int]  # (step, call within the step)


def _sites(traj: Trajectory) -> list[Site]:
    return [(s, c) for s, step in enumerate(traj.steps) for c in range(len(step.calls))]


def _pick(candidates: list, severity: float, rng: random.Random) -> list:
    if not candidates:
        return []
    return sorted(rng.sample(candidates, min(len(candidates), share(severity, len(candidates)))))


def _with_calls(traj: Trajectory, changed: dict[Site, ToolCall]) -> Trajectory:
    steps = [msgspec.structs.replace(step, calls=[changed.get((s, c), call) for c, call in enumerate(step.calls)])
             if any(site[0] == s for site in changed) else step
             for s, step in enumerate(traj.steps)]
    return msgspec.structs.replace(traj, steps=steps)


def _call(traj: Trajectory, site: Site) -> ToolCall:
    return traj.steps[site[0]].calls[site[1]]


def _schema(traj: Trajectory, tool: str, arg: str) -> dict[str, Any]:
    found = traj.tool(tool)
    schema = found.properties.get(arg, {}) if found else {}
    return schema if isinstance(schema, dict) else {}


def _values_of(traj: Trajectory, arg: str) -> list[Any]:
    """Every value argument ``arg`` takes in the trajectory's calls."""
    return [c.arguments[arg] for step in traj.steps for c in step.calls if arg in c.arguments]


# ---- type-correct value changes -----------------------------------------------------------


def _nudge_int(value: int, schema: dict, rng: random.Random) -> int:
    lo, hi = schema.get("minimum", -math.inf), schema.get("maximum", math.inf)
    delta = rng.randint(1, max(1, abs(value) // 2))
    options = [v for v in (value + delta, value - delta, value + 1, value - 1) if lo <= v <= hi and v != value]
    if value >= 0:  # a count or an id does not turn negative
        options = [v for v in options if v >= 0] or options
    return rng.choice(options) if options else value


def _nudge_float(value: float, rng: random.Random) -> float:
    text = repr(value)
    decimals = len(text.split(".")[1]) if "." in text and "e" not in text else 1
    factor = 1 + rng.choice((-1, 1)) * rng.uniform(0.2, 0.5)
    new = round(value * factor, decimals) if value else round(rng.uniform(1, 10), decimals)
    return float(new if new != value else value + 10 ** -decimals)


_DIGITS = re.compile(r"\d+")


def _corrupt_str(value: str, rng: random.Random, pool: list[Any]) -> str:
    others = sorted({v for v in pool if isinstance(v, str) and v and v != value})
    if others:
        return rng.choice(others)
    numbers = list(_DIGITS.finditer(value))
    if numbers:
        m = rng.choice(numbers)
        # A small step (an id, a day or a year next to the right one), keeping zero padding.
        n = int(m.group())
        new = str(n + rng.randint(1, max(1, min(9, n // 2)))).zfill(len(m.group()))
        return value[: m.start()] + new + value[m.end():]
    words = value.split(" ")
    if len(words) > 1:
        del words[rng.randrange(len(words))]
        return " ".join(words)
    if len(value) >= 2:
        i = rng.randrange(len(value) - 1)
        swapped = value[:i] + value[i + 1] + value[i] + value[i + 2:]
        if swapped != value:
            return swapped
        return value[:-1]
    return value


def corrupt_value(value: Any, schema: dict, rng: random.Random, pool: list[Any] = ()) -> Any:
    """A different value of the same type (see the module docstring); ``value`` itself
    when there is nothing to change (null, empty containers)."""
    enum = schema.get("enum")
    if isinstance(value, bool):
        return not value
    if enum and value in enum and len(enum) > 1:
        return rng.choice([e for e in enum if e != value])
    if isinstance(value, int):
        return _nudge_int(value, schema, rng)
    if isinstance(value, float):
        return _nudge_float(value, rng)
    if isinstance(value, str):
        return _corrupt_str(value, rng, list(pool))
    if isinstance(value, list) and value:
        i = rng.randrange(len(value))
        items = schema.get("items", {}) if isinstance(schema.get("items"), dict) else {}
        return [corrupt_value(v, items, rng, [w for w in value if w != v]) if k == i else v
                for k, v in enumerate(value)]
    if isinstance(value, dict) and value:
        key = rng.choice(sorted(value))
        nested = schema.get("properties", {}).get(key, {})
        return {k: corrupt_value(v, nested, rng) if k == key else v for k, v in value.items()}
    return value


# ---- the nine ------------------------------------------------------------------------------


def argument_corrupt(traj: Trajectory, severity: float, rng: random.Random) -> Trajectory:
    """Change the value of a fraction ``severity`` of all arguments (at least one)."""
    candidates = [(site, arg) for site in _sites(traj) for arg in _call(traj, site).arguments]
    changed: dict[Site, ToolCall] = {}
    for site, arg in _pick(candidates, severity, rng):
        call = changed.get(site, _call(traj, site))
        value = call.arguments[arg]
        new = corrupt_value(value, _schema(traj, call.name, arg), rng, _values_of(traj, arg))
        changed[site] = ToolCall(call.name, {**call.arguments, arg: new})
    return _with_calls(traj, changed)


def tool_name_swap(traj: Trajectory, severity: float, rng: random.Random) -> Trajectory:
    """A fraction ``severity`` of the calls (at least one) go to another of the defined
    tools, with their arguments unchanged."""
    names = [t.name for t in traj.tools]
    changed = {}
    for site in _pick(_sites(traj), severity, rng):
        call = _call(traj, site)
        others = [n for n in names if n != call.name]
        if others:
            changed[site] = ToolCall(rng.choice(others), call.arguments)
    return _with_calls(traj, changed)


_VERB_SWAPS = {"get": "fetch", "fetch": "get", "search": "find", "find": "search", "list": "get_all",
               "create": "add", "add": "create", "update": "set", "set": "update", "delete": "remove",
               "remove": "delete", "check": "verify", "book": "reserve", "send": "post",
               "calculate": "compute", "convert": "transform", "lookup": "search"}
_SUFFIXES = ("_details", "_v2", "_info", "_advanced", "_by_id", "_all")


def _invented(name: str, defined: set[str], rng: random.Random) -> str:
    """A plausible tool name that is not among the defined ones."""
    verb, _, rest = name.partition("_")
    options = [f"{_VERB_SWAPS[verb]}_{rest}"] if verb in _VERB_SWAPS and rest else []
    options += [name + s for s in _SUFFIXES]
    return rng.choice([o for o in options if o not in defined])


def hallucinated_tool(traj: Trajectory, severity: float, rng: random.Random) -> Trajectory:
    """A fraction ``severity`` of the calls (at least one) go to a tool that was never
    defined, named like the real one (``get_weather`` -> ``fetch_weather``,
    ``get_weather_details``)."""
    defined = {t.name for t in traj.tools}
    changed = {site: ToolCall(_invented(_call(traj, site).name, defined, rng), _call(traj, site).arguments)
               for site in _pick(_sites(traj), severity, rng)}
    return _with_calls(traj, changed)


def missing_required_arg(traj: Trajectory, severity: float, rng: random.Random) -> Trajectory:
    """In a fraction ``severity`` of the calls that pass a required argument (at least
    one), drop one of those required arguments."""
    def required(site: Site) -> list[str]:
        call = _call(traj, site)
        tool = traj.tool(call.name)
        return [a for a in (tool.required if tool else []) if a in call.arguments]

    changed = {}
    for site in _pick([s for s in _sites(traj) if required(s)], severity, rng):
        call = _call(traj, site)
        drop = rng.choice(required(site))
        changed[site] = ToolCall(call.name, {k: v for k, v in call.arguments.items() if k != drop})
    return _with_calls(traj, changed)


_GENERIC_ARGS = (("verbose", True), ("limit", 10), ("format", "json"), ("debug", True), ("timeout", 30))


def extra_spurious_arg(traj: Trajectory, severity: float, rng: random.Random) -> Trajectory:
    """A fraction ``severity`` of the calls (at least one) get an argument their tool does
    not define: one another call of the trajectory passes (with its value), else a generic
    one (``verbose: true``, ``limit: 10``, …)."""
    changed = {}
    for site in _pick(_sites(traj), severity, rng):
        call = _call(traj, site)
        tool = traj.tool(call.name)
        defined = set(tool.properties) if tool else set()
        borrowed = sorted({(k, json.dumps(v, sort_keys=True)) for step in traj.steps for c in step.calls
                           for k, v in c.arguments.items() if k not in defined and k not in call.arguments})
        options = [(k, json.loads(v)) for k, v in borrowed] or [
            (k, v) for k, v in _GENERIC_ARGS if k not in defined and k not in call.arguments]
        if options:
            key, value = rng.choice(options)
            changed[site] = ToolCall(call.name, {**call.arguments, key: value})
    return _with_calls(traj, changed)


def drop_intermediate_step(traj: Trajectory, severity: float, rng: random.Random) -> Trajectory:
    """Remove a fraction ``severity`` (at least one) of the steps before the last; the
    final answer stays, now resting on a result the trace never obtained."""
    n = len(traj.steps)
    if n < 2:
        return traj
    dropped = set(_pick(list(range(n - 1)), severity, rng))
    return msgspec.structs.replace(traj, steps=[s for i, s in enumerate(traj.steps) if i not in dropped])


def _json_leaves(value: Any, path: tuple = ()) -> list[tuple[tuple, Any]]:
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in _json_leaves(v, (*path, k))]
    if isinstance(value, list):
        return [leaf for i, v in enumerate(value) for leaf in _json_leaves(v, (*path, i))]
    return [] if value is None or value == "" else [(path, value)]


def _set_leaf(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {k: _set_leaf(v, rest, new) if k == head else v for k, v in value.items()}
    return [_set_leaf(v, rest, new) if i == head else v for i, v in enumerate(value)]


def _corrupt_result(text: str, final_answer: str, rng: random.Random) -> str:
    """Change one value of a JSON result, preferring one the final answer quotes (so the
    answer and the trace now disagree); a number inside a plain-text result otherwise."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        numbers = list(_DIGITS.finditer(text))
        if not numbers:
            return text
        m = rng.choice(numbers)
        return text[: m.start()] + str(_nudge_int(int(m.group()), {}, rng)) + text[m.end():]
    leaves = _json_leaves(data)
    if not leaves:
        return text
    quoted = [leaf for leaf in leaves if not isinstance(leaf[1], bool) and str(leaf[1]) in final_answer]
    path, value = rng.choice(quoted or leaves)
    pool = [v for p, v in leaves if p and path and p[-1] == path[-1]]
    return json.dumps(_set_leaf(data, path, corrupt_value(value, {}, rng, pool)), ensure_ascii=False)


def corrupt_tool_result(traj: Trajectory, severity: float, rng: random.Random) -> Trajectory:
    """Change one value in a fraction ``severity`` of the tool results (at least one)."""
    sites = [(s, k) for s, step in enumerate(traj.steps) for k in range(len(step.results))]
    chosen = _pick(sites, severity, rng)
    steps = list(traj.steps)
    for s, k in chosen:
        results = list(steps[s].results)
        results[k] = _corrupt_result(results[k], traj.final_answer, rng)
        steps[s] = msgspec.structs.replace(steps[s], results=results)
    return msgspec.structs.replace(traj, steps=steps)


def early_termination(traj: Trajectory, severity: float, rng: random.Random) -> Trajectory:
    """Stop a fraction ``severity`` of the steps (at least one) before the end, keeping at
    least one step where there are two or more: the agent's last message is the thought with
    which it would have started the first dropped step, and no final answer follows."""
    n = len(traj.steps)
    if n == 0:
        return traj
    keep = max(1, n - share(severity, n)) if n >= 2 else 0
    return msgspec.structs.replace(traj, steps=traj.steps[:keep], final_answer=traj.steps[keep].thought)


def step_pad(traj: Trajectory, severity: float, rng: random.Random) -> Trajectory:
    """The verbosity probe: repeat round(severity · n) steps (at least one), each right after
    its original — the same thought, calls and results again, a redundant re-check. The
    trace is longer and no better."""
    with_calls = [i for i, s in enumerate(traj.steps) if s.calls]
    if not with_calls:
        return traj
    extra = max(1, round(severity * len(traj.steps)))
    repeats = [rng.choice(with_calls) for _ in range(extra)]
    steps: list[Step] = []
    for i, step in enumerate(traj.steps):
        steps += [step] * (1 + repeats.count(i))
    return msgspec.structs.replace(traj, steps=steps)


AGENTIC_PERTURBATIONS: dict[str, AgenticPerturbation] = {
    "argument_corrupt": argument_corrupt,
    "tool_name_swap": tool_name_swap,
    "hallucinated_tool": hallucinated_tool,
    "missing_required_arg": missing_required_arg,
    "extra_spurious_arg": extra_spurious_arg,
    "drop_intermediate_step": drop_intermediate_step,
    "corrupt_tool_result": corrupt_tool_result,
    "early_termination": early_termination,
    "step_pad": step_pad,
}

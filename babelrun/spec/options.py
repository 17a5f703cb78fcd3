"""The base of every backend's options struct, and how a judge's own options are typed.

A backend declares its options as a ``JudgeOptions`` subclass in its own module; the registry
(``babelrun.judges``, a layer above) tells ``typed_options`` which struct a backend name has.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec


class _Options(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """Strict and immutable, as every manifest section."""


class JudgeOptions(_Options, frozen=True):
    """Base of a backend's own options (``SimulatedOptions``, ``OpenAIOptions``, a plugin's).

    A backend declares its options as a subclass in its own module and names it on its
    ``register`` line (a plugin: its class's ``options`` attribute). A manifest stays flat: the
    fields of ``JudgeSpec`` are decoded by it, every other field of the judge by its backend's
    options struct (``decode_judges``), and run.yaml writes them back flat (``flat_judge``).
    """

    def identity(self) -> dict[str, Any]:
        """What these options add to ``judge_id``: every field set away from its default (any
        option may change a verdict unless its backend says otherwise by overriding this)."""
        defaults = type(self)()
        return {name: msgspec.to_builtins(getattr(self, name)) for name in self.__struct_fields__
                if getattr(self, name) != getattr(defaults, name)}

    def hidden_reasoning(self) -> bool:
        """The model reasons before it answers (a reasoning model): the reply needs room."""
        return False


class UnresolvedOptions(JudgeOptions, frozen=True):
    """A judge's own options read where no backend registry was consulted (a run.yaml decoded by
    ``store``): kept as given; ``babelrun.judges.options_of`` types them."""

    values: dict[str, Any] = {}

    def identity(self) -> dict[str, Any]:
        raise TypeError("unresolved judge options: type them with babelrun.judges.options_of first")



# How a backend name finds its options struct; set by ``babelrun.judges`` (the registry lives
# in a layer above this one). Unset, a judge's own options stay ``UnresolvedOptions``.
OptionsResolver = Callable[[str], "type[JudgeOptions]"]
_resolver: list[OptionsResolver] = []


def set_options_resolver(resolve: OptionsResolver) -> None:
    _resolver[:] = [resolve]


class OptionsError(ValueError):
    """A judge's options its backend's struct refuses: msgspec's message (naming the path
    under the judge) and the struct, for the manifest to say it in its own terms."""

    def __init__(self, message: str, kind: type[JudgeOptions]) -> None:
        super().__init__(message)
        self.message, self.kind = message, kind


# The options every judge spec had while they were one flat struct, at their defaults: a
# run.yaml written then lists them all for every judge, and reads the same today (``legacy``).
LEGACY_DEFAULTS: dict[str, Any] = {
    "reasoning": False, "reasoning_effort": None, "headers": {}, "headers_env": {}, "organization": None,
    "project": None, "azure": None, "callable": None, "batch_size": 8, "max_wait_ms": 20.0, "threads": None,
    "context": 4096, "replicas": 1, "simulated": None, "batch": False, "batch_poll_s": 30.0, "rule": None,
    "replay": None, "prompt_cache": False}


def typed_options(backend: str, values: Mapping[str, Any], resolve: OptionsResolver | None = None, *,
                  legacy: bool = False) -> JudgeOptions:
    """``values`` decoded by ``backend``'s options struct; ``OptionsError`` names the field.
    ``legacy`` (a run.yaml): another backend's option at its old default is no error."""
    resolve = resolve or (_resolver[0] if _resolver else None)
    if resolve is None:
        return UnresolvedOptions(values=dict(values))
    kind = resolve(backend)
    if legacy:
        values = {k: v for k, v in values.items() if k in kind.__struct_fields__
                  or k not in LEGACY_DEFAULTS or v != LEGACY_DEFAULTS[k]}
    try:
        return msgspec.convert(dict(values), kind)
    except msgspec.ValidationError as e:
        raise OptionsError(str(e), kind) from None

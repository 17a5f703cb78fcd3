"""Providers that speak the OpenAI Chat Completions protocol: their differences are data.

A preset gives the base URL and the environment variable of the key (None where a local
server needs none), and whether the provider returns token log-probabilities (``soft``
verdicts) and a batch API. A judge may still set ``endpoint`` and ``api_key_env`` to override both.
"""

from __future__ import annotations

import msgspec


class Preset(msgspec.Struct, frozen=True):
    endpoint: str
    key_env: str | None
    logprobs: bool  # the provider returns token log-probabilities: soft verdicts
    batch_api: bool = False  # the provider has OpenAI's Batch API (engine/batches.py)
    # The endpoint is always the user's own resource (so the preset's key applies to it).
    own_endpoint: bool = False
    model_required: bool = True  # False where another field names the model (Azure's deployment)
    options: frozenset[str] = frozenset()  # OpenAIOptions fields of this preset alone (refused elsewhere)
    requires: dict[str, str] = {}  # field -> what to say when it is missing (``check``)


PRESETS: dict[str, Preset] = {
    "openai": Preset("https://api.openai.com/v1", "OPENAI_API_KEY", True, batch_api=True),
    # Local servers: no key, unless the user started them with one.
    "vllm": Preset("http://localhost:8000/v1", None, True),
    "llamacpp_server": Preset("http://localhost:8080/v1", None, True),
    "ollama": Preset("http://localhost:11434/v1", None, False),
    "lmstudio": Preset("http://localhost:1234/v1", None, False),
    # Hosted APIs.
    "groq": Preset("https://api.groq.com/openai/v1", "GROQ_API_KEY", False),
    "together": Preset("https://api.together.xyz/v1", "TOGETHER_API_KEY", True),
    "mistral": Preset("https://api.mistral.ai/v1", "MISTRAL_API_KEY", False),
    "deepseek": Preset("https://api.deepseek.com/v1", "DEEPSEEK_API_KEY", True),
    "openrouter": Preset("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", True),
    "fireworks": Preset("https://api.fireworks.ai/inference/v1", "FIREWORKS_API_KEY", True),
    # Azure OpenAI: the endpoint is the resource's (https://NAME.openai.azure.com), from the
    # manifest or AZURE_OPENAI_ENDPOINT; the deployment and api-version from ``azure:``.
    "azure": Preset("", "AZURE_OPENAI_API_KEY", True, own_endpoint=True, model_required=False,
                    options=frozenset({"azure"}), requires={
                        "azure": "the azure backend needs azure: {deployment: NAME}",
                        "endpoint": "your resource's URL (https://NAME.openai.azure.com), "
                                    "or set AZURE_OPENAI_ENDPOINT"}),
}


class EnvDefaults(msgspec.Struct, frozen=True):
    """The environment variables a provider's own client reads, used where the manifest
    leaves the field unset (the manifest always wins)."""

    endpoint_env: str
    key_env: str
    organization_env: str | None = None
    project_env: str | None = None


ENV_DEFAULTS: dict[str, EnvDefaults] = {
    "openai": EnvDefaults("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"),
    "azure": EnvDefaults("AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_KEY"),
}


def key_env(backend: str, explicit: str | None, endpoint: str | None) -> str | None:
    """The key's environment variable: the judge's own; else, when the judge talks to the
    preset's own endpoint, the preset's; else none (another server: name its key, if any)."""
    if explicit is not None:
        return explicit
    preset = PRESETS.get(backend)
    if preset and preset.own_endpoint:  # the endpoint is always the user's own resource
        return preset.key_env
    return preset.key_env if preset and endpoint is None else None

"""Local models in-process through MLX (``mlx-lm``), behind the same micro-batcher as llamacpp.

``model`` is the path of a local folder that ``mlx_lm.load`` reads: ``config.json``, the
weights as ``*.safetensors`` and the tokenizer files (an ``mlx-community`` download, or the
output of ``mlx_lm.convert``). Nothing is fetched from the Hub: a name that is not an existing
folder is refused when the manifest is checked.

Prompt: always the completion-style prompt of the llamacpp backend (``completion_prompt``:
the judge's instructions and the two answers as plain text, then ``Answer:``), even where the
tokenizer has a chat template. One prompt shape for every local model keeps the two local
backends comparable, and the judge id (which names the template, not the tokenizer) then
captures everything that shapes the prompt. The continuation is cut at its first newline, as
llamacpp's ``stop=["\\n"]`` does, and goes through the same strict parser as any judge's reply.

Sampling: ``temperature`` goes to ``mlx_lm.sample_utils.make_sampler(temp=...)``; 0 (the
default) is greedy argmax. For ``temperature > 0`` MLX's global generator is seeded with the
run's seed when the model is loaded, but sampled verdicts are not reproducible across batch
compositions.

Batching: the first request to arrive waits up to ``max_wait_ms`` for up to ``batch_size``
others, then hands the whole batch to the model thread in one hop (one batch at a time). There
the batch goes to ``mlx_lm.batch_generate`` as one call: the prompts are prefilled and decoded
together (left-padded), so unlike llamacpp a batch is decoded in parallel, not in turn.

Tokens: ``tokens_in`` is the prompt's token count (``tokenizer.encode``, which adds the BOS
token where the tokenizer does); ``tokens_out`` counts the tokens generated, up to
``max_tokens``, before the end-of-sequence token (which is not counted), including any the
newline cut drops from ``raw``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..spec import JudgeSpec
from .base import FatalJudgeError, JudgeReply, JudgeRequest
from .local import LocalJudge, completion_prompt
from .options import LocalOptions
from .protocol import max_tokens

_INSTALL = "the mlx backend needs `pip install mlx-lm` (and `mlx[cpu]` on Linux)"


@functools.lru_cache(maxsize=4)
def _load(path: str) -> Any:  # mlx_lm.load: (model, tokenizer)
    # One model per folder per process: judges sharing a folder share its weights.
    import mlx_lm

    return mlx_lm.load(path)


class MlxOptions(LocalOptions, frozen=True):
    """MLX's options: the micro-batcher and runtime (``LocalOptions``); nothing more."""


class MlxJudge(LocalJudge):
    """An mlx-lm model folder (see the module docstring)."""

    def _llm(self) -> Any:
        if self._model is None:
            path = Path(self.spec.model).expanduser()
            if not path.is_dir():
                raise FatalJudgeError("not_found", f"no MLX model folder at {path}")
            try:
                import mlx.core as mx

                self._model = _load(str(path.resolve()))
            except ImportError:
                raise FatalJudgeError("not_installed", _INSTALL) from None
            except (OSError, ValueError) as e:  # missing config, weights or tokenizer; unknown architecture
                raise FatalJudgeError("not_found", f"cannot load the MLX model at {path}: {e}") from None
            mx.random.seed(self.seed)
        return self._model

    def _run_batch(self, requests: list[JudgeRequest]) -> list[JudgeReply]:
        model, tokenizer = self._llm()
        from mlx_lm import batch_generate
        from mlx_lm.sample_utils import make_sampler

        prompts = [tokenizer.encode(completion_prompt(r.messages)) for r in requests]
        out = batch_generate(model, tokenizer, prompts, max_tokens=max_tokens(self.spec),
                             sampler=make_sampler(temp=self.spec.temperature), return_token_ids=True)
        assert out.token_ids is not None  # mlx_lm fills it when asked (return_token_ids=True)
        served = Path(self.spec.model).expanduser().resolve().name
        return [JudgeReply(raw=text.split("\n", 1)[0], served_model=served, tokens_in=len(prompt),
                           tokens_out=len(ids))
                for prompt, text, ids in zip(prompts, out.texts, out.token_ids, strict=True)]


def check(spec: JudgeSpec, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """The manifest's check of an MLX judge: a model folder."""
    if not spec.model:
        return "model", "an MLX model folder's path (config.json, *.safetensors, tokenizer)"
    if not Path(spec.model).expanduser().is_dir():
        return "model", f"folder not found: {spec.model}"
    return None

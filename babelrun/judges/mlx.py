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
from pathlib import Path

import anyio

from ..manifest import JudgeSpec
from .base import FatalJudgeError, JudgeReply, JudgeRequest
from .llamacpp import _Pending, completion_prompt

_INSTALL = "the mlx backend needs `pip install mlx-lm` (and `mlx[cpu]` on Linux)"


@functools.lru_cache(maxsize=4)
def _load(path: str):
    # One model per folder per process: judges sharing a folder share its weights.
    import mlx_lm

    return mlx_lm.load(path)


class MlxJudge:
    def __init__(self, spec: JudgeSpec, judge_id: str, seed: int = 0):
        self.spec = spec
        self.judge_id = judge_id
        self.seed = seed
        self._model = None
        self._pending: list[_Pending] = []
        self._full = anyio.Event()
        self._thread = anyio.CapacityLimiter(1)  # the model runs one batch at a time
        self.batches: list[int] = []  # the size of every batch run (for tests and benches)

    def _llm(self):
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
        out = batch_generate(model, tokenizer, prompts, max_tokens=self.spec.max_tokens,
                             sampler=make_sampler(temp=self.spec.temperature), return_token_ids=True)
        served = Path(self.spec.model).expanduser().resolve().name
        return [JudgeReply(raw=text.split("\n", 1)[0], served_model=served, tokens_in=len(prompt),
                           tokens_out=len(ids))
                for prompt, text, ids in zip(prompts, out.texts, out.token_ids, strict=True)]

    async def judge(self, request: JudgeRequest) -> JudgeReply:
        mine = _Pending(request, anyio.Event())
        self._pending.append(mine)
        if len(self._pending) == 1:
            await self._lead()
        elif len(self._pending) >= self.spec.batch_size:
            self._full.set()
        await mine.done.wait()
        if mine.error is not None:
            raise mine.error
        return mine.reply

    async def _lead(self) -> None:
        """Collect a batch, run it on the model thread, hand every request its reply. Shielded:
        the followers wait on this leader, so it must finish what it started."""
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(self.spec.max_wait_ms / 1000):
                await self._full.wait()
            batch, self._pending, self._full = self._pending, [], anyio.Event()
            self.batches.append(len(batch))
            try:
                replies = await anyio.to_thread.run_sync(self._run_batch, [p.request for p in batch],
                                                         limiter=self._thread)
                for p, reply in zip(batch, replies, strict=True):
                    p.reply = reply
            except BaseException as e:  # the whole batch shares the failure (a fatal load error)
                for p in batch:
                    p.error = e
            for p in batch:
                p.done.set()

    async def aclose(self) -> None:
        self._model = None  # the cached weights stay loaded for the process's other judges

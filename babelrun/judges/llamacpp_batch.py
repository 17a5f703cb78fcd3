"""A micro-batch of prompts decoded together on llama.cpp's low-level API, as one prefix tree.

Judge prompts share long prefixes: every prompt of a template starts with the same
instructions, the two orders of an item share the question, the perturbations of one reference
share the reference in slot A. ``prefix_tree`` lays a batch's token sequences out as a tree of
segments; each segment's tokens go into the ``llama_batch`` once, tagged with every sequence
that holds them, so their KV cells are computed once and referenced by all of those sequences
(no copies). Parents come before children, so one ``llama_decode`` call evaluates the whole
tree: llama.cpp's attention mask lets a token see the cells of its own (first) sequence id,
and a prefix's cells carry every sequence id below them.

After that prefill, soft verdicts read each sequence's next-token logits; generated verdicts
decode their few tokens together, one token for every still-running sequence per
``llama_decode`` call. Tokens are chosen here (``sample``): greedy at temperature 0, as
llama-cpp-python's completion is; above 0, its default filters and a draw from the judge's
seeded generator (sampled verdicts then depend on how requests fell into batches).

This needs the low-level names of llama-cpp-python ≥ 0.3.10 (``llama_batch_init``,
``llama_decode``, ``llama_get_memory``, ``llama_memory_clear``, a ``kv_unified`` context
parameter); ``available()`` says whether they are there, and the backend falls back to the
high-level API, one prompt at a time, where they are not.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import numpy as np

NEEDED = ("llama_batch_init", "llama_batch_free", "llama_decode", "llama_get_memory", "llama_memory_clear",
          "llama_get_logits_ith", "llama_init_from_model", "llama_free")


def available() -> bool:
    """Whether the installed llama-cpp-python has the low-level API this module drives."""
    try:
        import llama_cpp
    except ImportError:
        return False
    fields = {field[0] for field in llama_cpp.llama_context_params._fields_}  # (name, type[, bits])
    return all(hasattr(llama_cpp, name) for name in NEEDED) and "kv_unified" in fields


def max_sequences() -> int:
    """The most sequences one llama.cpp context holds (``LLAMA_MAX_SEQ``)."""
    import llama_cpp

    return int(llama_cpp.llama_max_parallel_sequences()) if hasattr(llama_cpp, "llama_max_parallel_sequences") else 64


class Segment(NamedTuple):
    """Positions ``start``..``stop-1`` that the prompts ``seqs`` (indices) hold in common."""

    start: int
    stop: int
    seqs: tuple[int, ...]


def prefix_tree(prompts: list[list[int]]) -> list[Segment]:
    """The prompts as segments of a prefix tree, parents before children: every token of every
    prompt lies in exactly one segment, with the indices of all the prompts that share it (and
    its whole prefix). Identical prompts share every segment."""
    out: list[Segment] = []
    stack = [(tuple(range(len(prompts))), 0)]
    while stack:
        seqs, start = stack.pop()
        first = prompts[seqs[0]]
        stop = start
        while all(len(prompts[s]) > stop and prompts[s][stop] == first[stop] for s in seqs):
            stop += 1
        if stop > start:
            out.append(Segment(start, stop, seqs))
        children: dict[int, list[int]] = {}
        for s in seqs:
            if len(prompts[s]) > stop:
                children.setdefault(prompts[s][stop], []).append(s)
        stack.extend((tuple(group), stop) for group in reversed(children.values()))
    return out


def apart(prompts: list[list[int]]) -> list[Segment]:
    """Every prompt whole in its own sequence, nothing shared (what bench/ compares against)."""
    return [Segment(0, len(p), (s,)) for s, p in enumerate(prompts)]


class Decoder:
    """A llama.cpp context of its own (the model's weights shared with the high-level
    ``Llama``), with one unified KV cache for up to ``n_seq`` sequences of ``n_ctx`` cells in
    all. Runs in the model thread only."""

    def __init__(self, llm: Any, n_seq: int, n_ctx: int, flash: bool = False):  # llm: llama_cpp.Llama
        import llama_cpp

        self._lib = llama_cpp
        params = llama_cpp.llama_context_params.from_buffer_copy(llm.context_params)
        params.n_ctx = n_ctx
        params.n_batch = n_ctx  # the whole tree in one llama_decode call (split into n_ubatch inside)
        params.n_seq_max = n_seq
        params.kv_unified = True  # sequences reference each other's cells
        params.swa_full = True  # Gemma's sliding-window layers: keep the shared prefix's cells
        # Every token attends over the whole unified cache, masked to its own sequence. Plain
        # attention multiplies by the masked cells too (at batch 8, ~1,500 cells for a prompt
        # that sees ~300); llama.cpp's CPU flash attention skips them — but it is off by
        # default: with the generic (GGML_NATIVE=OFF) kernels its numerics flipped one of six
        # greedy verdicts against the one-at-a-time path (the agreement test), and a verdict
        # must not depend on batching. ``flash=True`` is for benchmarks that check agreement.
        params.flash_attn_type = (llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash
                                  else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
        self.n_ctx, self.n_seq, self.n_vocab = n_ctx, n_seq, llm.n_vocab()
        self._ctx = llama_cpp.llama_init_from_model(llm._model.model, params)
        if not self._ctx:
            raise MemoryError(f"llama.cpp could not make a context of {n_ctx} cells for {n_seq} sequences")
        self._memory = llama_cpp.llama_get_memory(self._ctx)
        self._batch = llama_cpp.llama_batch_init(n_ctx, 0, n_seq)
        self.decode_s = 0.0  # time inside llama_decode, and the prompt tokens it evaluated (bench/)
        self.evaluated = 0

    def close(self) -> None:
        if self._ctx:
            self._lib.llama_batch_free(self._batch)
            self._lib.llama_free(self._ctx)
            self._ctx = None

    def _decode(self, tokens: list[int], pos: list[int], seqs: list[tuple[int, ...]], outputs: list[bool]) -> None:
        batch, n = self._batch, len(tokens)
        batch.n_tokens = n
        np.ctypeslib.as_array(batch.token, shape=(n,))[:] = tokens
        np.ctypeslib.as_array(batch.pos, shape=(n,))[:] = pos
        np.ctypeslib.as_array(batch.n_seq_id, shape=(n,))[:] = [len(s) for s in seqs]
        np.ctypeslib.as_array(batch.logits, shape=(n,))[:] = outputs
        for i, group in enumerate(seqs):
            row = batch.seq_id[i]
            for k, s in enumerate(group):
                row[k] = s
        started = time.perf_counter()
        status = self._lib.llama_decode(self._ctx, batch)
        self.decode_s += time.perf_counter() - started
        if status != 0:
            raise RuntimeError(f"llama_decode failed ({status}) on {n} tokens")

    def _logits(self, index: int) -> np.ndarray:
        return np.ctypeslib.as_array(self._lib.llama_get_logits_ith(self._ctx, index),
                                     shape=(self.n_vocab,)).copy()

    def prefill(self, prompts: list[list[int]], tree: list[Segment]) -> list[np.ndarray]:
        """Clear the cache, evaluate the prompts as the segments of ``tree`` (sequence i is
        prompt i: ``prefix_tree``, or ``apart`` for bench/), and return each prompt's
        next-token logits."""
        self._lib.llama_memory_clear(self._memory, True)
        tokens: list[int] = []
        pos: list[int] = []
        seqs: list[tuple[int, ...]] = []
        outputs: list[bool] = []
        last: dict[tuple[int, int], int] = {}  # (prompt, position) of a prompt's last token -> batch index
        ends = {(s, len(p) - 1) for s, p in enumerate(prompts)}
        for segment in tree:
            source = prompts[segment.seqs[0]]
            for p in range(segment.start, segment.stop):
                mine = [s for s in segment.seqs if (s, p) in ends]
                for s in mine:
                    last[(s, p)] = len(tokens)
                tokens.append(source[p])
                pos.append(p)
                seqs.append(segment.seqs)
                outputs.append(bool(mine))
        self._decode(tokens, pos, seqs, outputs)
        self.evaluated += len(tokens)
        return [self._logits(last[(s, len(p) - 1)]) for s, p in enumerate(prompts)]

    def step(self, running: dict[int, tuple[int, int]]) -> dict[int, np.ndarray]:
        """One generated token for each running sequence (sequence -> (token, position)),
        decoded together; each sequence's next-token logits."""
        order = list(running)
        self._decode([running[s][0] for s in order], [running[s][1] for s in order],
                     [(s,) for s in order], [True] * len(order))
        return {s: self._logits(i) for i, s in enumerate(order)}


def sample(logits: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    """The next token: greedy (argmax) at temperature 0; else llama-cpp-python's default chain
    for a completion (top-k 40, top-p 0.95, min-p 0.05, then the temperature) and a draw."""
    if temperature <= 0:
        return int(np.argmax(logits))
    top = np.argsort(logits)[::-1][:40].copy()
    values = logits[top].astype(np.float64)
    probs = np.exp(values - values[0])
    probs /= probs.sum()
    keep = int(np.searchsorted(np.cumsum(probs), 0.95) + 1)  # top-p: the smallest set reaching 0.95
    keep = min(keep, int((probs >= 0.05 * probs[0]).sum()))  # min-p: at least 5% of the best
    values = values[:max(keep, 1)] / temperature
    weights = np.exp(values - values.max())
    return int(top[rng.choice(len(weights), p=weights / weights.sum())])


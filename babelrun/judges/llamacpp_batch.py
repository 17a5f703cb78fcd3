"""A micro-batch of prompts decoded together on llama.cpp's low-level API, sharing prefixes.

Judge prompts share long prefixes: every prompt of a template starts with the same
instructions, the two orders of an item share the question, the perturbations of one reference
share the reference in slot A. Each sequence has a KV stream of its own (``kv_unified``
off), so a token's attention walks its own sequence's cells only, as on the one-at-a-time path
(in one unified cache every token walks every sequence's cells, masked: at batch 8, ~1,600
cells for a prompt that sees ~450, which made the batch slower than one prompt at a time
without flash attention). A prompt starts from the longest prefix it shares with a prompt
already evaluated (``plan``) — one of the last batch's, which stay resident, or an earlier one
of its own batch — whose stream is copied into its own (``llama_memory_seq_cp``: a whole
stream, then the tail past the shared prefix removed), and evaluates only the rest, one
``llama_decode`` call a prompt: a call holding several streams is cut by llama.cpp into
micro-batches of as many tokens from each, which for suffixes of unequal lengths makes many
small ones, each reading all the weights (measured: ~0.7× the tokens/s of one prompt a call).

Batches alternate between two halves of the sequence ids, so the last batch's prompts (the
resident ones, their generated tokens removed) and the new ones never share a stream; once the
new batch has copied its prefixes, the last batch's streams are emptied (``llama_memory_seq_rm``).
The cache is allocated once, two streams per sequence of a batch, and holds one batch's
prompts between batches: it cannot grow over a run.

After that prefill, soft verdicts read each sequence's next-token logits; generated verdicts
decode their few tokens together, one token for every still-running sequence per
``llama_decode`` call. Tokens are chosen here (``sample``): greedy at temperature 0, as
llama-cpp-python's completion is; above 0, its default filters and a draw from the judge's
seeded generator (sampled verdicts then depend on how requests fell into batches).

This needs the low-level names of llama-cpp-python ≥ 0.3.10 (``llama_batch_init``,
``llama_decode``, ``llama_get_memory``, ``llama_memory_seq_cp``…, a ``kv_unified`` context
parameter); ``available()`` says whether they are there, and the backend falls back to the
high-level API, one prompt at a time, where they are not.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import numpy as np

NEEDED = ("llama_batch_init", "llama_batch_free", "llama_decode", "llama_get_memory", "llama_memory_clear",
          "llama_memory_seq_cp", "llama_memory_seq_rm", "llama_get_logits_ith", "llama_init_from_model", "llama_free")


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


def common(a: list[int], b: list[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


class Source(NamedTuple):
    """Where a prompt's first ``n`` tokens come from: resident prompt ``of`` (of the last
    batch) or, with ``resident`` False, prompt ``of`` of its own batch."""

    resident: bool
    of: int
    n: int


def plan(prompts: list[list[int]], resident: list[list[int]]) -> list[Source | None]:
    """Each prompt's source: the prompt already evaluated (resident, or earlier in the batch)
    that shares the longest prefix with it, at most all its tokens but the last (evaluated for
    its logits) unless it is a duplicate of one earlier in the batch (whose logits it takes); a
    resident one, then the earliest, among equals; None where nothing is shared."""
    sources: list[Source | None] = []
    for s, prompt in enumerate(prompts):
        cap = len(prompt) - 1
        best: Source | None = None
        for r, tokens in enumerate(resident):
            n = min(common(tokens, prompt), cap)
            if n > (best.n if best else 0):
                best = Source(True, r, n)
        for t in range(s):
            n = common(prompts[t], prompt)
            n = n if n == len(prompt) == len(prompts[t]) else min(n, cap)  # a duplicate shares its logits too
            if n > (best.n if best else 0):
                best = Source(False, t, n)
        sources.append(best)
    return sources


def evaluates(prompts: list[list[int]], resident: list[list[int]] | None = None) -> int:
    """The prompt tokens ``Decoder.prefill`` evaluates for ``prompts`` (sharing prefixes)."""
    sources = plan(prompts, resident or [])
    return sum(len(p) - (src.n if src else 0) for p, src in zip(prompts, sources, strict=True))


def apart(prompts: list[list[int]]) -> list[Segment]:
    """Every prompt whole in its own sequence, nothing shared (what bench/ compares against)."""
    return [Segment(0, len(p), (s,)) for s, p in enumerate(prompts)]


class Decoder:
    """A llama.cpp context of its own (the model's weights shared with the high-level
    ``Llama``): a KV stream of ``n_cells`` cells for each of ``2 * n_seq`` sequences (a batch
    of up to ``n_seq``, and the batch before it, kept; ``n_seq`` streams without ``keep``).
    Runs in the model thread only."""

    def __init__(self, llm: Any, n_seq: int, n_cells: int, flash: bool = False,
                 keep: bool = True):  # llm: llama_cpp.Llama
        import llama_cpp

        self._lib = llama_cpp
        self.keep = keep and 2 * n_seq <= max_sequences()
        streams = 2 * n_seq if self.keep else n_seq
        params = llama_cpp.llama_context_params.from_buffer_copy(llm.context_params)
        params.n_ctx = n_cells * streams  # llama.cpp gives each stream n_ctx / n_seq_max cells
        params.n_batch = params.n_ctx  # a round in one llama_decode call (split into n_ubatch inside)
        params.n_seq_max = streams
        params.kv_unified = False  # a stream per sequence: attention walks its own cells only
        params.swa_full = True  # Gemma's sliding-window layers: keep every cell a later prompt may copy
        # Flash attention is off by default: with the generic (GGML_NATIVE=OFF) kernels its
        # numerics flipped one of six greedy verdicts against the one-at-a-time path (the
        # agreement test), and a verdict must not depend on batching. ``flash=True`` is for
        # benchmarks that check agreement.
        params.flash_attn_type = (llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash
                                  else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
        self.n_cells, self.n_seq, self.n_vocab = n_cells, n_seq, llm.n_vocab()
        self._ctx = llama_cpp.llama_init_from_model(llm._model.model, params)
        if not self._ctx:
            raise MemoryError(f"llama.cpp could not make a context of {n_cells} cells for {streams} sequences")
        self._memory = llama_cpp.llama_get_memory(self._ctx)
        self._batch = llama_cpp.llama_batch_init(params.n_ctx, 0, 1)
        self.decode_s = 0.0  # time inside llama_decode, and the prompt tokens it evaluated (bench/)
        self.evaluated = 0
        self.reused = 0  # prompt tokens taken from a prompt evaluated before (copied, not evaluated)
        self.resident: list[tuple[int, list[int]]] = []  # the last batch's prompts: (sequence id, tokens)
        self.first_evaluated: list[int] = []  # per prompt of the last prefill: its first position evaluated
        self._ids: list[int] = []  # prompt index -> sequence id, for the running batch

    def close(self) -> None:
        if self._ctx:
            self._lib.llama_batch_free(self._batch)
            self._lib.llama_free(self._ctx)
            self._ctx = None

    def forget(self) -> None:
        """Empty the cache: the next batch takes no prefix from before (bench/: a cold start)."""
        self._lib.llama_memory_clear(self._memory, True)
        self.resident = []

    def adopt(self, old: Decoder) -> None:
        """Take ``old``'s resident prompts into this (larger) context, their KV state copied
        byte for byte (``llama_state_seq_get_data``/``set_data``), so that growing the context
        for a longer prompt does not cost the next batch its kept prefixes. They land in
        sequences 0.., below this decoder's other half; a prompt that does not copy is dropped
        (it is only an accelerator)."""
        import ctypes

        if not (self.keep and old.keep and old.resident):
            return
        lib = self._lib
        adopted: list[tuple[int, list[int]]] = []
        for seq, tokens in old.resident[: self.n_seq]:
            lib.llama_memory_seq_rm(old._memory, seq, len(tokens), -1)  # its generated tail
            size = lib.llama_state_seq_get_size(old._ctx, seq)
            buf = (ctypes.c_uint8 * size)()
            dest = len(adopted)
            if (size and lib.llama_state_seq_get_data(old._ctx, buf, size, seq) == size
                    and lib.llama_state_seq_set_data(self._ctx, buf, size, dest) == size):
                adopted.append((dest, tokens))
            else:
                lib.llama_memory_seq_rm(self._memory, dest, -1, -1)
        self.resident = adopted

    def held(self) -> int:
        """Cells the resident prompts hold."""
        return sum(len(tokens) for _, tokens in self.resident)

    def _decode(self, tokens: list[int], pos: list[int], seqs: list[int], outputs: list[bool]) -> None:
        batch, n = self._batch, len(tokens)
        batch.n_tokens = n
        np.ctypeslib.as_array(batch.token, shape=(n,))[:] = tokens
        np.ctypeslib.as_array(batch.pos, shape=(n,))[:] = pos
        np.ctypeslib.as_array(batch.n_seq_id, shape=(n,))[:] = 1
        np.ctypeslib.as_array(batch.logits, shape=(n,))[:] = outputs
        for i, s in enumerate(seqs):
            batch.seq_id[i][0] = s
        started = time.perf_counter()
        status = self._lib.llama_decode(self._ctx, batch)
        self.decode_s += time.perf_counter() - started
        if status != 0:
            raise RuntimeError(f"llama_decode failed ({status}) on {n} tokens")

    def _logits(self, index: int) -> np.ndarray:
        return np.ctypeslib.as_array(self._lib.llama_get_logits_ith(self._ctx, index),
                                     shape=(self.n_vocab,)).copy()

    def prefill(self, prompts: list[list[int]], share: bool = True, reuse: bool = True) -> list[np.ndarray]:
        """Evaluate the prompts (prompt i in sequence i of this batch), each from the longest
        prefix it shares with a resident prompt (``reuse``) or an earlier one of the batch
        (``share``), and return each prompt's next-token logits. The prompts stay resident
        for the next batch (with ``keep``)."""
        lib, memory = self._lib, self._memory
        resident = self.resident if (self.keep and reuse) else []
        for seq, kept in resident:  # the last batch's generated tokens: only prompts are shared
            lib.llama_memory_seq_rm(memory, seq, len(kept), -1)
        sources = plan(prompts, [kept for _, kept in resident]) if share or resident else [None] * len(prompts)
        if not share:
            sources = [src if src and src.resident else None for src in sources]
        base = self.n_seq if self.keep and self.resident and self.resident[0][0] < self.n_seq else 0
        self._ids = ids = [base + s for s in range(len(prompts))]
        starts = [src.n if src else 0 for src in sources]
        logits: list[np.ndarray] = []
        for s, (prompt, src, start) in enumerate(zip(prompts, sources, starts, strict=True)):
            if src is None:
                lib.llama_memory_seq_rm(memory, ids[s], -1, -1)
            else:  # a whole stream (copied at the next llama_decode), less its tail
                lib.llama_memory_seq_cp(memory, resident[src.of][0] if src.resident else ids[src.of], ids[s], -1, -1)
                lib.llama_memory_seq_rm(memory, ids[s], start, -1)
            if start == len(prompt):  # a duplicate: nothing to evaluate
                logits.append(logits[src.of] if src else logits[-1])
                continue
            n = len(prompt) - start
            self._decode(prompt[start:], list(range(start, len(prompt))), [ids[s]] * n, [False] * (n - 1) + [True])
            self.evaluated += n
            logits.append(self._logits(n - 1))
        self.reused += sum(starts)
        self.first_evaluated = starts
        # The last batch's prompts have given their prefixes (a prompt that takes from one
        # evaluates a token at least, so its copy is done): free their streams, so that only
        # this batch's stay.
        for seq, _ in self.resident:
            lib.llama_memory_seq_rm(memory, seq, -1, -1)
        self.resident = [(ids[s], p) for s, p in enumerate(prompts)] if self.keep else []
        return logits

    def step(self, running: dict[int, tuple[int, int]]) -> dict[int, np.ndarray]:
        """One generated token for each running sequence (prompt index -> (token, position)),
        decoded together; each sequence's next-token logits."""
        order = list(running)
        self._decode([running[s][0] for s in order], [running[s][1] for s in order],
                     [self._ids[s] for s in order], [True] * len(order))
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


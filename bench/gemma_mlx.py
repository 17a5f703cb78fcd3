"""Make an ``mlx_lm`` model folder from the Gemma 3 270M GGUF that the ``local`` extra ships, so
``bench/mlx_batching.py`` can measure MLX on a real small model offline (nothing is on the
package index in MLX's own format).

The GGUF's tensors (Q8_0/Q5_0/Q4_K/Q6_K) are dequantized with the ``gguf`` package to float32,
renamed to the Hugging Face Gemma 3 names that ``mlx_lm.models.gemma3_text`` loads, and the
RMSNorm weights get back their Hugging Face form (llama.cpp's converter stores 1 + w). The
tokenizer is rebuilt from the GGUF's vocabulary by ``transformers`` (``gguf_file=``). The
weights are the quantized model's, dequantized: the same function as the GGUF up to float
rounding. The script checks that the next-token choice on judge prompts matches llama.cpp's.

    python bench/gemma_mlx.py OUT_FOLDER
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

NAMES = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
         "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
         "attn_norm": "input_layernorm", "post_attention_norm": "post_attention_layernorm",
         "ffn_norm": "pre_feedforward_layernorm", "post_ffw_norm": "post_feedforward_layernorm",
         "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}


def hf_name(name: str) -> str:
    if name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if name == "output_norm.weight":
        return "model.norm.weight"
    _, layer, kind, _ = name.split(".")
    return f"model.layers.{layer}.{NAMES[kind]}.weight"


def convert(gguf_path: Path, out: Path) -> Path:
    import gguf
    import mlx.core as mx
    from transformers import AutoTokenizer

    reader = gguf.GGUFReader(gguf_path)
    meta = {k: f.contents() for k, f in reader.fields.items() if k.startswith("gemma3.")}
    weights = {}
    for tensor in reader.tensors:
        array = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        if tensor.name.endswith("norm.weight"):
            array = array - 1.0  # llama.cpp's Gemma converter stored 1 + w
        weights[hf_name(tensor.name)] = mx.array(array)
    config = {"model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"],
              "hidden_size": meta["gemma3.embedding_length"], "num_hidden_layers": meta["gemma3.block_count"],
              "intermediate_size": meta["gemma3.feed_forward_length"],
              "num_attention_heads": meta["gemma3.attention.head_count"],
              "num_key_value_heads": meta["gemma3.attention.head_count_kv"],
              "head_dim": meta["gemma3.attention.key_length"],
              "rms_norm_eps": meta["gemma3.attention.layer_norm_rms_epsilon"],
              "vocab_size": weights["model.embed_tokens.weight"].shape[0],
              "rope_theta": meta["gemma3.rope.freq_base"], "rope_local_base_freq": 10_000.0,
              "query_pre_attn_scalar": meta["gemma3.attention.key_length"],
              "sliding_window": meta["gemma3.attention.sliding_window"], "sliding_window_pattern": 6,
              "max_position_embeddings": meta["gemma3.context_length"], "tie_word_embeddings": True}
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=1))
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    tokenizer.save_pretrained(str(out))
    return out


def check(out: Path, n: int = 6) -> None:
    """The MLX model's greedy next token on judge prompts against llama.cpp's on the GGUF."""
    import mlx.core as mx
    import mlx_lm

    sys.path.insert(0, str(Path(__file__).parent))
    from llamacpp_batching import requests

    from babelrun.judges.llamacpp import _load, model_path
    from babelrun.judges.local import completion_prompt

    model, tokenizer = mlx_lm.load(str(out))
    llm = _load(str(model_path("gemma3-270m")), 4096, 2, 0)
    for request in requests(n):
        text = completion_prompt(request.messages)
        tokens = llm.tokenize(text.encode(), add_bos=True, special=False)
        llm.reset()
        llm.eval(tokens)
        ours = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
        theirs = np.array(model(mx.array([tokens]))[0, -1].astype(mx.float32))
        agree = int(np.argmax(ours)) == int(np.argmax(theirs))
        print(f"{len(tokens)} tokens: llama.cpp {llm.detokenize([int(np.argmax(ours))])!r} "
              f"mlx {tokenizer.decode([int(np.argmax(theirs))])!r} {'agree' if agree else 'DIFFER'}; "
              f"mlx tokenizer gives the same ids: {tokenizer.encode(text) == tokens}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path)
    args = p.parse_args()
    from babelrun.judges.llamacpp import model_path

    print(convert(model_path("gemma3-270m"), args.out))
    check(args.out)


if __name__ == "__main__":
    main()

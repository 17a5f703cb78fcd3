"""The MLX backend with a tiny random-weight llama built in the test, behind the micro-batcher.

The model folder is made from scratch, offline: a byte-level BPE tokenizer trained on a few
sentences (``tokenizers``), saved as ``tokenizer.json`` + ``tokenizer_config.json``; a two-layer
llama (hidden size 32) instantiated from ``mlx_lm.models.llama`` with random weights, saved as
``model.safetensors`` under the parameter names the class itself uses.
"""

import json

import pytest

import babelrun
from babelrun.store import log
from helpers import quiet_audit, write_manifest

pytest.importorskip("mlx.core", reason="mlx is not installed (pip install mlx; mlx[cpu] on Linux)")
pytest.importorskip("mlx_lm", reason="mlx-lm is not installed (pip install mlx-lm)")
pytest.importorskip("tokenizers", reason="the tokenizers library is not installed")

SENTENCES = [
    "Answer A or B, or tie when both answers are equally good.",
    "The quick brown fox jumps over the lazy dog.",
    "Everyone has the right to life, liberty and security of person.",
    "Which answer is better? Answer: A",
    "Which answer is better? Answer: B",
]


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A folder ``mlx_lm.load`` reads: config.json, model.safetensors, the tokenizer files."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.models import llama
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    folder = tmp_path_factory.mktemp("models") / "tiny-llama"
    folder.mkdir()

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=["<eos>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(SENTENCES, trainer)  # every byte is in the vocabulary: no unknowns
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<eos>", "model_max_length": 4096}))

    config = {"model_type": "llama", "hidden_size": 32, "num_hidden_layers": 2, "intermediate_size": 64,
              "num_attention_heads": 2, "num_key_value_heads": 2, "rms_norm_eps": 1e-5,
              "vocab_size": tokenizer.get_vocab_size(), "max_position_embeddings": 4096,
              "tie_word_embeddings": True, "eos_token_id": tokenizer.token_to_id("<eos>")}
    (folder / "config.json").write_text(json.dumps(config))

    mx.random.seed(0)
    model = llama.Model(llama.ModelArgs.from_dict(config))
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(model.parameters())),
                        metadata={"format": "mlx"})
    return folder


def test_the_folder_loads_and_generates(tiny_model):
    import mlx_lm

    model, tokenizer = mlx_lm.load(str(tiny_model))
    assert tokenizer.encode("Answer: A")  # the trained tokenizer is the one loaded
    text = mlx_lm.generate(model, tokenizer, prompt="Which answer is better?", max_tokens=3)
    assert isinstance(text, str)


def test_tiny_model_judges_through_the_engine(tmp_path, tiny_model):
    judge = {"name": "tiny", "backend": "mlx", "model": str(tiny_model), "max_tokens": 3,
             "concurrency": 4, "batch_size": 4}
    corpus = {"languages": ["en"], "references_per_language": 1}
    path = write_manifest(tmp_path, [judge], corpus=corpus,
                          perturbations=[{"name": "truncate", "severities": [0.6]}])
    result = quiet_audit(path)
    assert result.exit_code == 0
    records = list(log.read(tmp_path / "run"))
    assert len(records) == result.planned_calls == 2
    assert all(r.status == "ok" and r.verdict in ("reference", "perturbed", "tie", "invalid") for r in records)
    assert all(r.tokens_in and r.tokens_in > 50 for r in records)  # the whole prompt was read
    assert all(r.tokens_out is not None and 0 <= r.tokens_out <= 3 for r in records)
    assert {r.served_model for r in records} == {"tiny-llama"}
    assert result.cards.judges[0].overall.presentations == 2


def test_manifest_refuses_a_missing_folder(tmp_path):
    from babelrun.manifest import ManifestError

    judge = {"name": "tiny", "backend": "mlx", "model": str(tmp_path / "nowhere")}
    with pytest.raises(ManifestError, match="model"):
        babelrun.load_manifest(write_manifest(tmp_path, [judge]))


def test_micro_batcher_collects_concurrent_requests(tiny_model):
    import anyio

    from babelrun.judges import JudgeRequest, build
    from babelrun.judges.prompt import TEMPLATES
    from babelrun.manifest import JudgeSpec
    from babelrun.plan import Plan

    spec = JudgeSpec(name="t", backend="mlx", model=str(tiny_model), batch_size=4, max_wait_ms=200, max_tokens=2)
    judge = build(spec, 0)
    plan = Plan(babelrun.corpus.select(babelrun.Manifest(name="x", judges=[])).references[:1],
                [("truncate", [0.6])], 0)
    (item,) = list(plan.items())
    requests = [JudgeRequest.of(item, order, TEMPLATES["pairwise"]) for order in ("ref_first", "pert_first")] * 2
    pairs = []

    async def one(r):
        pairs.append((r.order, await judge.judge(r)))

    async def go():
        async with anyio.create_task_group() as tg:
            for r in requests:
                tg.start_soon(one, r)

    anyio.run(go)
    assert judge.batches == [4]  # four concurrent requests, one batch, one thread hop
    assert all(r.tokens_out <= 2 and r.served_model == "tiny-llama" and r.tokens_in for _, r in pairs)
    # Greedy: the same prompt twice in one batch decodes to the same reply.
    for order in ("ref_first", "pert_first"):
        assert len({r.raw for o, r in pairs if o == order}) == 1

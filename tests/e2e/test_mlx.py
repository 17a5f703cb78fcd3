"""The MLX backend with a tiny random-weight llama (``helpers.tiny_mlx_model``), behind the micro-batcher."""

import pytest

import babelrun
from babelrun.judges import judge_spec
from babelrun.store import log
from helpers import quiet_audit, request, tiny_mlx_model, write_manifest

pytest.importorskip("mlx.core", reason="mlx is not installed (pip install mlx; mlx[cpu] on Linux)")
pytest.importorskip("mlx_lm", reason="mlx-lm is not installed (pip install mlx-lm)")
pytest.importorskip("tokenizers", reason="the tokenizers library is not installed")



@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return tiny_mlx_model(tmp_path_factory.mktemp("models") / "tiny-llama")


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

    from babelrun.judges import build
    from babelrun.plan import Plan

    spec = judge_spec(name="t", backend="mlx", model=str(tiny_model), batch_size=4, max_wait_ms=200, max_tokens=2)
    judge = build(spec, 0)
    plan = Plan(babelrun.corpus.select(babelrun.Manifest(name="x", judges=[])).references[:1],
                [("truncate", [0.6])], 0)
    (item,) = list(plan.items())
    requests = [request(item, order) for order in ("ref_first", "pert_first")] * 2
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

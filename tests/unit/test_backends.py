"""The backend registry: each backend is registered once with its declared capabilities,
and everything else reads them — which manifest options apply, soft verdicts, batch APIs,
replicas, how many calls are in flight."""

import pytest

from babelrun import judges
from babelrun.app.cli import main
from babelrun.core.keys import Shard
from babelrun.engine.limits import CallLimits, account_key
from babelrun.judges import judge_spec
from babelrun.judges.presets import PRESETS
from helpers import write_manifest

REMOTE = {"backend": "openai", "model": "m", "endpoint": "http://127.0.0.1:9/v1"}


def _validate(tmp_path, capsys, judge: dict) -> tuple[int, str]:
    path = write_manifest(tmp_path, [{"name": "j", **judge}])
    code = main(["validate", str(path)])
    return code, capsys.readouterr().err


def test_every_preset_is_a_registered_openai_backend():
    for name, preset in PRESETS.items():
        entry = judges.BACKENDS[name]
        assert (entry.module, entry.capabilities.soft, entry.capabilities.remote) == ("openai", preset.logprobs, True)
    assert {n for n, b in judges.BACKENDS.items() if b.capabilities.batch_api} == {"openai", "anthropic"}
    assert {n for n, b in judges.BACKENDS.items() if b.capabilities.in_process} == {
        "simulated", "llamacpp", "mlx", "rule", "python", "replay"}


@pytest.mark.parametrize(("judge", "field"), [
    # remote HTTP backends: the local runtime's options do not apply
    ({**REMOTE, "batch_size": 4}, "batch_size"),
    ({**REMOTE, "threads": 2}, "threads"),
    ({**REMOTE, "context": 1024}, "context"),
    ({**REMOTE, "max_wait_ms": 5}, "max_wait_ms"),
    ({**REMOTE, "replicas": 2}, "replicas"),
    ({**REMOTE, "simulated": {"default_accuracy": 0.5}}, "simulated"),
    ({"backend": "gemini", "model": "m", "endpoint": "http://127.0.0.1:9", "batch": True}, "batch"),
    # the simulated judge has no endpoint, key or provider batch
    ({"backend": "simulated", "endpoint": "http://127.0.0.1:9/v1"}, "endpoint"),
    ({"backend": "simulated", "api_key_env": "HOME"}, "api_key_env"),
    ({"backend": "simulated", "batch_poll_s": 5}, "batch_poll_s"),
    # in-process models: no endpoint, no batch API
    ({"backend": "llamacpp", "model": "gemma-3-270m", "endpoint": "http://127.0.0.1:9/v1"}, "endpoint"),
    ({"backend": "mlx", "model": "/nonexistent", "batch": True}, "batch"),
])
def test_options_that_do_not_apply_are_refused(tmp_path, capsys, judge, field):
    code, err = _validate(tmp_path, capsys, judge)
    assert code == 2
    assert f"judges[0].{field}: does not apply to the {judge['backend']} backend" in err
    assert len(err.strip().splitlines()) == 1


def test_options_that_apply_pass(tmp_path, capsys):
    assert _validate(tmp_path, capsys, {**REMOTE, "concurrency": 4, "timeout_s": 5})[0] == 0
    assert _validate(tmp_path, capsys, {"backend": "simulated", "replicas": 1, "batch_size": 4})[0] == 0


def test_unknown_backend_lists_the_known_ones(tmp_path, capsys):
    code, err = _validate(tmp_path, capsys, {"backend": "opneai", "model": "m"})
    assert code == 2 and "did you mean 'openai'?" in err and "anthropic" in err


def test_call_limits_split_concurrency_across_shards():
    spec = judge_spec(name="j", backend="openai", model="m", concurrency=10)
    assert CallLimits.of(spec).workers == 10 and CallLimits.of(spec).pool == 10
    parts = [CallLimits.of(spec, Shard(i, 4)).workers for i in range(4)]
    assert parts == [3, 3, 2, 2] and sum(parts) == 10
    assert [CallLimits.of(spec, Shard(i, 16)).workers for i in range(16)].count(1) == 16  # one each at least
    adaptive = CallLimits.of(judge_spec(name="j", backend="openai", model="m", concurrency=32,
                                       adaptive_concurrency=True))
    assert (adaptive.gate_start, adaptive.gate().maximum) == (4, 32)


def test_in_process_judges_have_their_own_account():
    a, b = (judge_spec(name=n, backend="simulated") for n in ("a", "b"))
    assert account_key(a) != account_key(b)
    assert account_key(judge_spec(name="a", backend="openai", model="x")) == account_key(
        judge_spec(name="b", backend="openai", model="y"))

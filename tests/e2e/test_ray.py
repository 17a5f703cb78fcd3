"""The Ray executor on a local 2-CPU Ray instance: a worker SIGKILLed mid-run, one shared rate
budget against a judge that enforces requests/min, resume across executors."""

import os
import re
import signal
import threading
import time
from collections import Counter

import pytest

import babelrun
from babelrun.judges import judge_id
from babelrun.plan import Plan
from babelrun.store import log
from babelrun.testing import FakeJudgeServer
from helpers import log_lines, quiet_audit, quiet_progress, write_manifest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")

CORPUS = {"sources": [{"kind": "bundled"}], "languages": ["ar", "hi", "ja", "sw"], "references_per_language": 4}
PERTURBATIONS = [{"name": n, "severities": [0.6]} for n in ("truncate", "shuffle", "repeat_pad", "number_corrupt")]
# The server admits 34 requests per sliding 2 s; the account's budget is 800/min: at most
# 2 + 26.7 per 2 s, leaving room for the scheduling jitter of a loaded 2-core machine. Each
# worker alone, unpaced, would send 4 / 20 ms = 200 calls/s; paced by a budget of its own,
# 800/min, the two together would send ~53 per 2 s and get 429s.
WINDOW_S, LIMIT, RPM = 2.0, 34, 800


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _manifest(folder, server, **fields):
    folder.mkdir(parents=True, exist_ok=True)
    judge = {"name": "fake", "backend": "openai", "model": "m", "endpoint": server.url, "concurrency": 4}
    judge.update(fields.pop("judge", {}))
    return babelrun.load_manifest(write_manifest(folder, [judge], corpus=CORPUS, perturbations=PERTURBATIONS,
                                                 **fields))


def _kill_shard_worker(run_dir, shard_tag, after_lines, killed):
    """SIGKILL the worker running ``shard_tag`` once its segments hold ``after_lines`` records."""
    deadline = time.monotonic() + 60
    lock = run_dir / "locks" / shard_tag
    while time.monotonic() < deadline:
        holder = lock.read_text() if lock.exists() else ""
        lines = log_lines(run_dir, f"{shard_tag}-*.jsonl")
        found = re.search(r"pid (\d+)", holder)
        if found and lines >= after_lines:
            os.kill(int(found.group(1)), signal.SIGKILL)
            killed.append(int(found.group(1)))
            return
        time.sleep(0.01)


def test_ray_audit_survives_a_killed_worker_within_one_shared_rate_budget(tmp_path, local_ray):
    with FakeJudgeServer(latency_s=0.02, rpm_window_s=WINDOW_S, seed=5) as server:
        # 1. A third of the plan judged locally, as a shard (resume across executors).
        first = _manifest(tmp_path / "ray", server)
        planned = {(judge_id(first.judges[0]), i, o) for i in Plan.from_manifest(first).item_ids
                   for o in ("ref_first", "pert_first")}
        local_part = quiet_audit(first, shard=log.Shard(0, 3))
        assert local_part.exit_code == 0 and 0 < local_part.new_records < len(planned) / 2

        # 2. The rest on Ray, 2 workers sharing one 800 rpm budget; shard 0's worker is killed.
        server.rpm_limit = LIMIT
        before = server.snapshot()
        on_ray = _manifest(tmp_path / "ray", server, executor="ray", judge={"rate_limit": {"rpm": RPM}},
                           ray={"workers": 2, "max_retries": 2})
        run_dir = on_ray.run_dir
        killed: list[int] = []
        killer = threading.Thread(target=_kill_shard_worker, args=(run_dir, "s0of2", 20, killed))
        killer.start()
        result = quiet_audit(on_ray)
        killer.join()
        during = server.snapshot()

        # 3. The same plan in one local process, as the reference.
        server.rpm_limit = None
        reference = quiet_audit(_manifest(tmp_path / "local", server))
    assert killed, "no worker was killed"
    assert result.exit_code == 0 and result.cards is not None
    assert result.already_done >= local_part.new_records
    # The killed shard was rescheduled: a second attempt, in another process, wrote its own segment.
    attempts = {p.name.split("-")[2] for p in (run_dir / "log").glob("s0of2-*.jsonl")}
    assert str(killed[0]) in attempts and len(attempts) == 2

    records = list(log.read(run_dir))
    ok = Counter(r.key for r in records if r.status == "ok")
    assert set(ok) == planned, "lost records"
    assert max(ok.values()) == 1, "duplicated records"
    assert not [r for r in records if r.status == "error"]
    # Zero 429s: the server, counting arrivals in every sliding 2 s, never saw the two workers
    # together send more than one budget admits (2 + 800/60 x 2 = 28.7, under its 34), where
    # a budget per worker would have let ~53 through. The server's count is the bound: the
    # records' write times are not (a loaded machine writes them in bursts).
    assert during["statuses"].get(429, 0) == before["statuses"].get(429, 0) == 0
    assert during["injected"].get("rpm", 0) == 0
    assert during["requests"] - before["requests"] >= len(planned) - local_part.new_records
    assert (run_dir / "cards.json").read_bytes() == (tmp_path / "local" / "run" / "cards.json").read_bytes()
    assert reference.new_records == len(planned)


def test_a_retry_after_pause_reaches_every_worker_of_an_unlimited_account(local_ray):
    import anyio

    from babelrun.app.cluster import BudgetActor, RemoteAccount

    actor = ray.remote(BudgetActor).options(num_cpus=0).remote(("http://x", "K"), None, None)
    one, two = RemoteAccount(actor, None, None, poll_s=0.05), RemoteAccount(actor, None, None, poll_s=0.05)

    async def admitted_after_pause() -> float:
        await two.admit(0)  # polls now: not paused
        one.pause(0.6)  # a 429 with Retry-After: 0.6 seen by the first worker
        await anyio.sleep(0.1)  # the second's next poll is due
        started = time.monotonic()
        await two.admit(0)
        return time.monotonic() - started

    waited = anyio.run(admitted_after_pause)
    assert waited > 0.3  # held by the other worker's pause (a lower bound: no clock can make it shorter)
    assert waited < 30  # and let go when it ends (a pause that never ended would hang here)
    ray.kill(actor)


def _replica_pids() -> list[int]:
    """Processes of live replica actors (Ray titles them ``ray::ReplicaActor…``)."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and open(f"/proc/{entry}/cmdline", "rb").read().startswith(b"ray::ReplicaActor"):
                pids.append(int(entry))
        except OSError:
            continue
    return pids


def _kill_a_replica(run_dir, after_lines, killed):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        lines = log_lines(run_dir)
        if lines >= after_lines and (pids := _replica_pids()):
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])
            return
        time.sleep(0.01)


def test_replicas_of_an_in_process_judge_serve_every_worker_and_survive_a_death(tmp_path, local_ray):
    knobs = {"position_bias": 0.1, "latency_ms": 100}
    judge = {"name": "sim", "backend": "simulated", "simulated": knobs, "concurrency": 4, "replicas": 2}
    corpus = {"sources": [{"kind": "bundled"}], "languages": ["en", "hi", "zh"], "references_per_language": 4}
    # The replicas hold a CPU each; the two workers only wait on them.
    (tmp_path / "ray").mkdir()
    path = write_manifest(tmp_path / "ray", [judge], corpus=corpus, perturbations=PERTURBATIONS, executor="ray",
                          ray={"workers": 2, "num_cpus": 0})
    progress, killed = quiet_progress(), []
    killer = threading.Thread(target=_kill_a_replica, args=(tmp_path / "ray" / "run", 20, killed))
    killer.start()
    result = quiet_audit(path, progress=progress)
    killer.join()
    assert killed and result.exit_code == 0
    (stats,) = result.stats.judges
    assert stats.ok == result.planned_calls and stats.failed == 0
    assert stats.retries >= 1  # the calls in flight on the dead replica, retried on a live one
    # Both replicas served (the restarted one counts from its restart).
    notes = progress.stream.getvalue()
    served = [int(n) for n in re.search(r"2 replicas served (\d+), (\d+) calls", notes).groups()]
    assert min(served) > 0 and sum(served) <= stats.calls

    (tmp_path / "local").mkdir()
    local = write_manifest(tmp_path / "local", [{**judge, "replicas": 1, "concurrency": 16}], corpus=corpus,
                           perturbations=PERTURBATIONS)
    assert quiet_audit(local).exit_code == 0
    records = list(log.read(tmp_path / "ray" / "run"))
    assert len(records) == len({r.key for r in records}) == result.planned_calls
    assert {r.key: r.raw for r in records} == {r.key: r.raw for r in log.read(tmp_path / "local" / "run")}
    assert ((tmp_path / "ray" / "run" / "cards.json").read_bytes()
            == (tmp_path / "local" / "run" / "cards.json").read_bytes())


def test_replicas_need_the_ray_executor(tmp_path):
    judge = {"name": "sim", "backend": "simulated", "replicas": 2}
    path = write_manifest(tmp_path, [judge], corpus={"languages": ["en"], "references_per_language": 1})
    with pytest.raises(babelrun.errors.UserError, match=r"judges\[0\].replicas: replicas are Ray actors"):
        quiet_audit(path)
    remote = write_manifest(tmp_path, [{"name": "r", "backend": "openai", "model": "m", "endpoint": "http://127.0.0.1:9/v1",
                                        "replicas": 2}])
    with pytest.raises(babelrun.errors.ManifestError,
                       match=r"judges\[0\].replicas: does not apply to the openai backend"):
        babelrun.load_manifest(remote)


def test_a_cascades_escalation_only_judge_runs_as_a_second_round_on_ray(tmp_path, local_ray):
    judges = [{"name": "cheap", "backend": "simulated", "simulated": {"default_accuracy": 0.75}},
              {"name": "strong", "backend": "simulated", "calls": "escalations",
               "simulated": {"default_accuracy": 0.97}}]
    composites = [{"kind": "cascade", "name": "casc", "cheap": "cheap", "strong": "strong"}]
    corpus = {"sources": [{"kind": "bundled"}], "languages": ["en", "hi"], "references_per_language": 4}

    def audit(folder, **fields):
        folder.mkdir()
        path = write_manifest(folder, judges, composites=composites, corpus=corpus, perturbations=PERTURBATIONS,
                              **fields)
        return quiet_audit(path), list(log.read(folder / "run"))

    on_ray, ray_records = audit(tmp_path / "ray", executor="ray", ray={"workers": 2, "num_cpus": 0})
    local, local_records = audit(tmp_path / "local")
    assert on_ray.exit_code == 0 and on_ray.planned_calls == local.planned_calls == len(local_records)
    assert {p.name[:5] for p in (tmp_path / "ray" / "run" / "log").glob("*.jsonl")} == {"s0of2", "s1of2"}
    # The strong judge answered the same escalated keys, each once, after the cheap judge.
    strong = [r for r in ray_records if r.judge == "strong"]
    assert 0 < len(strong) == len({r.key for r in strong}) == sum(r.judge == "strong" for r in local_records)
    assert max(r.ts for r in ray_records if r.judge == "cheap") <= min(r.ts for r in strong)
    assert on_ray.cards == local.cards


def test_a_run_started_on_ray_is_finished_locally(tmp_path, local_ray):
    """Ray → local (local → Ray is the killed-worker test's first step): the provider revokes
    the key mid-run, both workers stop; with the key back, a local audit finishes the run."""

    def revoke(run_dir, server, after_lines):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if log_lines(run_dir) >= after_lines:
                server.api_key = "revoked"  # every call without this key gets a 401 from now on
                return
            time.sleep(0.005)

    with FakeJudgeServer(latency_s=0.02) as server:
        on_ray = _manifest(tmp_path / "audit", server, executor="ray", ray={"workers": 2})
        revoker = threading.Thread(target=revoke, args=(on_ray.run_dir, server, 30))
        revoker.start()
        started = quiet_audit(on_ray)
        revoker.join()
        assert started.exit_code == 1 and started.stop_reasons  # the 401 stopped the judge
        server.api_key = None
        finished = quiet_audit(_manifest(tmp_path / "audit", server))  # same run, the local executor
        reference = quiet_audit(_manifest(tmp_path / "reference", server))
    assert finished.exit_code == 0 and 30 <= finished.already_done < finished.planned_calls
    records = list(log.read(on_ray.run_dir))
    ok = Counter(r.key for r in records if r.status == "ok")
    assert len(ok) == finished.planned_calls and max(ok.values()) == 1
    assert {s.name[:5] for s in (on_ray.run_dir / "log").glob("*.jsonl")} >= {"s0of2", "s1of2"}
    assert (on_ray.run_dir / "cards.json").read_bytes() == (tmp_path / "reference" / "run" / "cards.json").read_bytes()
    assert reference.new_records == finished.planned_calls


# -- on Ray: --budget split among the workers, the spend summed, the cache and stopping --

PRICE = {"input_per_mtok": 3.0, "output_per_mtok": 15.0}


def _usd(r) -> float:
    """One record's cost from its tokens, apart from engine/ledger.py."""
    return (r.tokens_in * PRICE["input_per_mtok"] + r.tokens_out * PRICE["output_per_mtok"]) / 1e6


def test_ray_workers_split_the_budget_and_share_the_cache(tmp_path, local_ray):
    cache = {"dir": str(tmp_path / "cache")}
    judge = {"price": PRICE, "concurrency": 3}
    with FakeJudgeServer(latency_s=0.002) as server:
        full = _manifest(tmp_path / "full", server, judge=judge)  # no cache: the plan's cost, for scale
        assert quiet_audit(full).exit_code == 0
        everything = list(log.read(full.run_dir))
        budget, one = sum(_usd(r) for r in everything) / 4, max(_usd(r) for r in everything)

        on_ray = _manifest(tmp_path / "ray", server, executor="ray", ray={"workers": 2}, judge=judge, cache=cache)
        first = quiet_audit(on_ray, budget=budget)
        assert first.exit_code == 1 and any("budget" in s for s in first.stop_reasons)
        records = list(log.read(on_ray.run_dir))
        spent = sum(_usd(r) for r in records)
        print(f"ray: budget {budget:.5f}, 2 workers spent {spent:.5f}; one call at most {one:.5f}")
        assert budget - 2 * one <= spent <= budget + 2 * one  # not 2 × the budget
        assert first.stats.judges[0].spend["total"] == pytest.approx(spent, abs=1e-5)  # both workers' ledgers
        again = quiet_audit(on_ray, budget=budget)  # continues
        both = list(log.read(on_ray.run_dir))
        assert again.exit_code == 1 and len(both) > len(records) and max(Counter(r.key for r in both).values()) == 1
        assert sum(_usd(r) for r in both) - spent <= budget + 2 * one
        rest = quiet_audit(on_ray)
        assert rest.exit_code == 0
        assert {r.key for r in log.read(on_ray.run_dir)} == {r.key for r in everything}
        asked = server.requests
        # a second run directory on Ray over the same cache: no call, every record cached
        other = _manifest(tmp_path / "ray2", server, executor="ray", ray={"workers": 2}, judge=judge, cache=cache)
        served = quiet_audit(other)
        assert served.exit_code == 0 and server.requests == asked
        assert served.stats.judges[0].cached == len(everything)  # summed over the workers
        assert all(r.cached for r in log.read(other.run_dir))


def test_ray_workers_agree_with_one_process_on_the_keys_not_needed(tmp_path, local_ray):
    import shutil

    from helpers import simulated

    judges = [simulated("good", default_accuracy=0.99), simulated("bad", default_accuracy=0.2)]
    corpus = {"sources": [{"kind": "bundled"}], "languages": ["en", "hi"], "references_per_language": 6}
    stop = {"on": "verdict", "confidence": 0.95, "min_items": 10}
    (tmp_path / "one").mkdir()
    single = quiet_audit(write_manifest(tmp_path / "one", judges, corpus=corpus, stopping=stop))
    assert single.exit_code == 0 and sum(j.not_needed for j in single.stats.judges) > 0
    shutil.copytree(tmp_path / "one", tmp_path / "ray")
    on_ray = quiet_audit(write_manifest(tmp_path / "ray", judges, corpus=corpus, stopping=stop,
                                        executor="ray", ray={"workers": 2}))
    assert on_ray.exit_code == 0 and sum(j.calls for j in on_ray.stats.judges) == 0
    assert {j.judge: j.not_needed for j in on_ray.stats.judges} == {j.judge: j.not_needed for j in single.stats.judges}
    assert on_ray.cards == single.cards

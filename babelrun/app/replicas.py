"""Replicas of an in-process judge on Ray (``replicas: N``): N actors (``ReplicaActor``), each
holding the model and reserving ``threads`` CPUs; every worker's engine sends its calls to the
least busy one (``ReplicaPool``), where the backend's micro-batcher batches the calls that
arrive together. A replica that dies is restarted by Ray and its calls are retried."""

from __future__ import annotations

import msgspec

from .. import judges
from ..errors import UserError
from ..judges import FatalJudgeError, JudgeReply, JudgeRequest, RejectedError, RetryableError
from ..spec import JudgeSpec, Manifest

INSTALL = "executor: ray needs Ray, which is not installed: pip install 'babelrun[ray]'"


def require_ray():
    try:
        import ray
    except ImportError:
        raise UserError(INSTALL) from None
    return ray


class _Failure(msgspec.Struct, frozen=True):
    """A judge error sent back from a replica as a value: our error classes take keyword
    parts that pickling an exception would lose."""

    severity: str  # retryable | rejected | fatal
    kind: str
    message: str
    retry_after: float | None = None

    def error(self) -> Exception:
        if self.severity == "retryable":
            return RetryableError(self.kind, self.message, self.retry_after)
        return (RejectedError if self.severity == "rejected" else FatalJudgeError)(self.kind, self.message)


class ReplicaActor:
    """One replica of an in-process judge (a Ray async actor): it holds the model and serves
    calls from every worker; the backend's own micro-batcher gathers the calls that arrive
    together into one batch, as it does in a local run."""

    def __init__(self, spec: JudgeSpec, seed: int):
        self.backend = judges.build(spec, seed)
        self.served = 0

    async def call(self, request: JudgeRequest) -> JudgeReply | _Failure:
        self.served += 1
        try:
            return await self.backend.judge(request)
        except RetryableError as e:
            return _Failure("retryable", e.kind, str(e), e.retry_after)
        except RejectedError as e:
            return _Failure("rejected", e.kind, str(e))
        except FatalJudgeError as e:
            return _Failure("fatal", e.kind, str(e))

    async def count(self) -> int:
        return self.served


class ReplicaPool:
    """A judge backend (``judges.Judge``) whose calls go to the least busy of its replicas
    (as this worker sees them). A replica that died is a retryable error: the engine's retry
    goes to another replica, or to the same one once Ray has restarted it."""

    def __init__(self, spec: JudgeSpec, judge_id: str, actors: list):
        from ..judges.protocol import Judging

        self.spec, self.judge_id = spec, judge_id
        self.protocol = Judging.of(spec)  # the requests and readings are the judge's, not the replicas'
        self._actors = actors
        self._busy = [0] * len(actors)
        self._ray = require_ray()

    async def judge(self, request: JudgeRequest) -> JudgeReply:
        i = min(range(len(self._actors)), key=self._busy.__getitem__)
        self._busy[i] += 1
        try:
            reply = await self._actors[i].call.remote(request)
        except self._ray.exceptions.RayActorError as e:
            raise RetryableError("replica_died",
                                 f"replica {i} of {self.spec.name!r} died: {type(e).__name__}") from None
        finally:
            self._busy[i] -= 1
        if isinstance(reply, _Failure):
            raise reply.error()
        return reply

    async def aclose(self) -> None:
        pass  # the driver ends the replicas when every shard is done


def start_replicas(ray, manifest: Manifest) -> dict[str, list]:
    """Judge name -> its replica actors, for every judge with ``replicas`` > 1. Each reserves
    the CPU threads its model uses."""
    out = {}
    for spec in manifest.judges:
        local = judges.local_of(spec)
        if local.replicas > 1:
            actor = ray.remote(ReplicaActor).options(
                num_cpus=local.threads or 1, max_restarts=manifest.ray.max_retries,
                max_concurrency=max(64, 4 * local.batch_size))
            out[spec.name] = [actor.remote(spec, manifest.seed) for _ in range(local.replicas)]
    # Wait until every replica is up: calls sent to one still starting would wait behind it
    # while the first one up took nearly all the rest.
    ray.get([a.count.remote() for actors in out.values() for a in actors])
    return out

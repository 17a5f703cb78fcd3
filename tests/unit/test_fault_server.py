"""The fault-injecting fake judge (babelrun.testing), spoken to with plain aiohttp on 127.0.0.1."""

import asyncio
import math
import random
import re
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass

import aiohttp
import msgspec
import pytest

from babelrun.testing import FakeJudgeServer, choose, sample_latency
from helpers import ROOT

PROMPT = "[Answer A]\nThe tower is 300 m tall.\n[End of Answer A]\n\n[Answer B]\nIt is tall.\n[End of Answer B]"
BODY = msgspec.json.encode({"model": "m", "messages": [{"role": "user", "content": PROMPT}]})


# What a client needs from a chat completion: at least one choice with a message.
class _Message(msgspec.Struct):
    content: str


class _Choice(msgspec.Struct):
    message: _Message


class _Completion(msgspec.Struct):
    choices: list[_Choice]


_decode_completion = msgspec.json.Decoder(_Completion).decode


@dataclass
class Reply:
    outcome: str  # ok, 429, 5xx, malformed, timeout, drop, or "unexpected ..."
    status: int | None = None
    headers: dict | None = None
    body: bytes = b""


def _classify(status: int, body: bytes) -> str:
    if status == 429:
        return "429"
    if status in (500, 502, 503):
        return "5xx"
    if status != 200:
        return f"unexpected {status}"
    try:
        completion = _decode_completion(body)
    except msgspec.DecodeError:  # ValidationError (no "choices") is a DecodeError too
        return "malformed"
    ok = completion.choices and completion.choices[0].message.content == choose(PROMPT)
    return "ok" if ok else "unexpected verdict"


async def post(session, url, timeout=2.0, headers=None) -> Reply:
    try:
        async with session.post(url + "/chat/completions", data=BODY, headers=headers,
                                timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
            body = await resp.read()
            return Reply(_classify(resp.status, body), resp.status, dict(resp.headers), body)
    except TimeoutError:  # before ClientError: aiohttp's timeout errors are both
        return Reply("timeout")
    except aiohttp.ClientConnectionError:
        return Reply("drop")


async def burst(url, n, *, concurrency=32, timeout=2.0) -> list[Reply]:
    queue = list(range(n))
    replies = []
    async with aiohttp.ClientSession() as session:
        async def worker():
            while queue:
                queue.pop()
                replies.append(await post(session, url, timeout))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return replies


async def sequence(url, n, *, timeout=2.0) -> list[str]:
    async with aiohttp.ClientSession() as session:
        return [(await post(session, url, timeout)).outcome for _ in range(n)]


def _within(count, n, p, sigmas=5):
    """``count`` is within ``sigmas`` binomial standard deviations of ``n * p``."""
    return abs(count - n * p) <= sigmas * math.sqrt(n * p * (1 - p))


async def test_each_fault_happens_at_its_rate_and_the_counters_agree():
    n = 800
    rates = {"429": 0.1, "5xx": 0.1, "timeout": 0.05, "drop": 0.1, "malformed": 0.1}
    server = FakeJudgeServer(seed=7, hang_s=30.0, **{f"rate_{k}": v for k, v in rates.items()})
    with server:
        replies = await burst(server.url, n, timeout=1.0)
        snap = server.snapshot()
        stopping = time.monotonic()
    # The timed-out requests still hang on the server (30 s): shutdown must not wait for them
    # (a bound a third of the hang: what it shows is that the hang was cut, however loaded the machine).
    assert time.monotonic() - stopping < 10
    seen = Counter(r.outcome for r in replies)
    assert set(seen) <= {*rates, "ok"}, seen
    for kind, rate in rates.items():
        assert _within(seen[kind], n, rate), (kind, seen)
        assert snap["injected"].get(kind, 0) == seen[kind]  # the client saw what was injected
    assert _within(seen["ok"], n, 1 - sum(rates.values()))
    assert snap["requests"] == n and snap["served_ok"] == seen["ok"]
    statuses = snap["statuses"]
    assert statuses[200] == seen["ok"] + seen["malformed"]
    assert statuses[429] == seen["429"]
    assert all(statuses.get(s, 0) > 0 for s in (500, 502, 503))  # every 5xx status occurs
    assert sum(statuses.get(s, 0) for s in (500, 502, 503)) == seen["5xx"]


async def test_a_seed_gives_the_same_outcomes_and_scripted_faults_do_not_shift_them():
    knobs = {"rate_429": 0.1, "rate_5xx": 0.1, "rate_timeout": 0.03, "rate_drop": 0.1,
             "rate_malformed": 0.1, "hang_s": 1.0}
    runs = []
    for seed, faults in ((11, None), (11, None), (12, None), (11, [503, 0])):
        with FakeJudgeServer(seed=seed, faults=faults, **knobs) as server:
            runs.append(await sequence(server.url, 60, timeout=0.25))
    first, again, other, scripted = runs
    assert first == again
    assert len(set(first)) >= 4  # the sequence is a mix, so equality means something
    assert other != first
    # The n-th request draws the same fate whatever came before: the script only replaces
    # the first two outcomes.
    assert scripted == ["5xx", "drop"] + first[2:]


async def test_injected_429_carries_a_parseable_retry_after():
    with FakeJudgeServer(rate_429=1.0, retry_after=0.25) as server:
        replies = await burst(server.url, 5, concurrency=1)
        injected = server.snapshot()["injected"]
    assert [r.outcome for r in replies] == ["429"] * 5
    assert all(float(r.headers["Retry-After"]) == 0.25 for r in replies)
    assert msgspec.json.decode(replies[0].body)["error"]["message"]
    assert not any(h.startswith("x-ratelimit") for h in replies[0].headers)  # no rpm_limit set
    assert injected == {"429": 5}


async def test_rpm_limit_admits_exactly_the_limit_in_a_burst():
    with FakeJudgeServer(rpm_limit=5) as server:
        replies = await burst(server.url, 12, concurrency=12)
        later = await burst(server.url, 1)  # the rejected ones took no slot, but none is free
        snap = server.snapshot()
    ok = [r for r in replies if r.outcome == "ok"]
    rejected = [r for r in replies if r.outcome == "429"]
    assert len(ok) == 5 and len(rejected) == 7
    assert later[0].outcome == "429"
    assert sorted(int(r.headers["x-ratelimit-remaining-requests"]) for r in ok) == [0, 1, 2, 3, 4]
    for r in replies:
        assert r.headers["x-ratelimit-limit-requests"] == "5"
        reset = re.fullmatch(r"(\d+(?:\.\d+)?)s", r.headers["x-ratelimit-reset-requests"])
        assert reset and 0 < float(reset.group(1)) <= 60
    for r in rejected:
        assert r.headers["x-ratelimit-remaining-requests"] == "0"
        assert 55 < float(r.headers["Retry-After"]) <= 60  # the burst's slots free in a minute
    assert snap["injected"] == {"rpm": 8} and snap["served_ok"] == 5


async def test_rpm_slot_frees_when_retry_after_says():
    with FakeJudgeServer(rpm_limit=2, rpm_window_s=0.3) as server:
        async with aiohttp.ClientSession() as session:
            first = [await post(session, server.url) for _ in range(3)]
            assert [r.outcome for r in first] == ["ok", "ok", "429"]
            wait = float(first[2].headers["Retry-After"])
            assert 0 < wait <= 0.3
            await asyncio.sleep(wait)
            after = await post(session, server.url)
    assert after.outcome == "ok"
    assert after.headers["x-ratelimit-remaining-requests"] in {"0", "1"}  # one or both freed


async def test_malformed_bodies_do_not_decode_as_a_chat_completion():
    with FakeJudgeServer(rate_malformed=1.0, seed=3) as server:
        replies = await burst(server.url, 30, concurrency=4)
        snap = server.snapshot()
    assert all(r.status == 200 and r.outcome == "malformed" for r in replies)
    kinds = Counter()
    for r in replies:
        with pytest.raises(msgspec.DecodeError):
            _decode_completion(r.body)
        try:
            kinds["json without choices" if "choices" not in msgspec.json.decode(r.body) else "?"] += 1
        except msgspec.DecodeError:
            kinds["not json"] += 1
    assert set(kinds) == {"json without choices", "not json"}  # both variants occur
    assert snap["served_ok"] == 0 and snap["injected"] == {"malformed": 30}


async def test_dropped_connection_raises_a_client_connection_error():
    with FakeJudgeServer(rate_drop=1.0) as server:
        async with aiohttp.ClientSession() as session:
            with pytest.raises(aiohttp.ClientConnectionError):
                async with session.post(server.url + "/chat/completions", data=BODY) as resp:
                    await resp.read()
        snap = server.snapshot()
    assert snap["statuses"] == {} and snap["injected"] == {"drop": 1} and snap["requests"] == 1


async def test_timeout_fault_times_out_a_short_client_and_does_not_hold_up_shutdown():
    server = FakeJudgeServer(rate_timeout=1.0, hang_s=30.0)
    with server:
        async with aiohttp.ClientSession() as session:
            with pytest.raises(TimeoutError):
                async with session.post(server.url + "/chat/completions", data=BODY,
                                        timeout=aiohttp.ClientTimeout(total=0.2)) as resp:
                    await resp.read()
            # A second request is still hanging on the server while it shuts down.
            hanging = asyncio.create_task(post(session, server.url, timeout=10))
            await asyncio.sleep(0.1)
            stopping = time.monotonic()
            server.__exit__(None, None, None)
            assert time.monotonic() - stopping < 10  # not the 30 s hang
            assert (await hanging).outcome == "drop"
    assert server.snapshot()["served_ok"] == 0


async def test_no_verdict_is_counted_for_a_client_that_gave_up():
    with FakeJudgeServer(rate_timeout=1.0, hang_s=0.2) as server:
        reply = (await burst(server.url, 1, timeout=0.05))[0]
        await asyncio.sleep(0.3)  # past the hang: the server has found the client gone
        snap = server.snapshot()
    assert reply.outcome == "timeout"
    assert snap["served_ok"] == 0 and snap["statuses"] == {} and snap["injected"] == {"timeout": 1}


async def test_a_patient_client_gets_its_verdict_after_the_hang():
    with FakeJudgeServer(rate_timeout=1.0, hang_s=0.1) as server:
        async with aiohttp.ClientSession() as session:
            start = time.monotonic()
            reply = await post(session, server.url, timeout=5)
            elapsed = time.monotonic() - start
        snap = server.snapshot()
    assert reply.outcome == "ok" and elapsed >= 0.1
    assert snap["injected"] == {"timeout": 1} and snap["served_ok"] == 1


def test_latency_distributions_have_the_set_mean():
    rng = random.Random(5)
    assert sample_latency(rng, "fixed", 0.2) == 0.2
    n, mean = 20000, 0.2
    uniform = [sample_latency(rng, "uniform", mean, jitter_s=0.1) for _ in range(n)]
    assert 0.1 <= min(uniform) and max(uniform) <= 0.3
    assert abs(statistics.fmean(uniform) - mean) <= 5 * (0.1 / math.sqrt(3)) / math.sqrt(n)
    sigma = 0.5
    lognormal = [sample_latency(rng, "lognormal", mean, sigma=sigma) for _ in range(n)]
    sd = mean * math.sqrt(math.exp(sigma**2) - 1)
    assert abs(statistics.fmean(lognormal) - mean) <= 5 * sd / math.sqrt(n)
    # Its mean, not its median, is the set value: the median sits below it (a right tail).
    assert statistics.median(lognormal) == pytest.approx(mean * math.exp(-sigma**2 / 2), rel=0.03)


async def test_latency_delays_the_reply():
    with FakeJudgeServer(latency_s=0.1, latency="uniform", jitter_s=0.05, seed=1) as server:
        async with aiohttp.ClientSession() as session:
            start = time.monotonic()
            reply = await post(session, server.url)
    assert reply.outcome == "ok" and time.monotonic() - start >= 0.05


@pytest.mark.parametrize("knobs", [
    {"rate_429": 1.5}, {"rate_drop": -0.1}, {"rate_5xx": 0.6, "rate_timeout": 0.6},
    {"latency": "gamma"}, {"latency": "uniform", "latency_s": 0.1, "jitter_s": 0.2},
    {"rpm_limit": 0}, {"hang_s": -1},
])
def test_bad_knobs_are_refused(knobs):
    with pytest.raises(ValueError):
        FakeJudgeServer(**knobs)


def test_a_taken_port_fails_at_once():
    with FakeJudgeServer() as server:
        # OSError at once; a server that did not notice would raise RuntimeError after 10 s.
        with pytest.raises(OSError), FakeJudgeServer(port=server.port):
            pass


async def test_cli_serves_until_sigterm_and_reports_its_counters():
    cmd = [sys.executable, "-m", "babelrun.testing", "--port", "0", "--rate-429", "1",
           "--rpm-limit", "100", "--seed", "3", "--key", "k"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 20)
        url = re.fullmatch(r"fake judge at (http://127\.0\.0\.1:\d+/v1)\n", line).group(1)
        async with aiohttp.ClientSession() as session:
            reply = await post(session, url, headers={"Authorization": "Bearer k"})
        assert reply.outcome == "429" and float(reply.headers["Retry-After"]) >= 0
        assert reply.headers["x-ratelimit-remaining-requests"] == "99"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    counters = msgspec.json.decode(err.strip().splitlines()[-1])
    assert counters["requests"] == 1 and counters["injected"] == {"429": 1}


def test_cli_refuses_a_rate_above_one():
    bad = subprocess.run([sys.executable, "-m", "babelrun.testing", "--rate-drop", "2"],
                         cwd=ROOT, capture_output=True, text=True, timeout=20)
    assert bad.returncode == 2 and "rate_drop" in bad.stderr


def test_one_wire_format_class_per_provider_and_every_route_speaks_one():
    from babelrun import judges, testing

    assert {type(w).__name__ for w in testing.WIRE_FORMATS.values()} == {"OpenAIWire", "AnthropicWire", "GeminiWire"}
    assert all(isinstance(w, testing.WireFormat) and w.name == n for n, w in testing.WIRE_FORMATS.items())
    assert set(testing.ROUTES.values()) == set(testing.WIRE_FORMATS)
    # Each is the wire format of a registered backend module.
    assert set(testing.WIRE_FORMATS) <= {b.module for b in judges.BACKENDS.values() if b.capabilities.remote}
    for wire in testing.WIRE_FORMATS.values():  # an error and a verdict in each provider's own shape
        assert wire.body_key in wire.completion("A", "m", PROMPT, False) and wire.error(400, "no")
        with pytest.raises(ValueError, match=f"expected a {wire.name} request"):
            wire.prompt(b"{}")


async def test_gather_holds_the_first_verdicts_until_that_many_are_in_flight():
    with FakeJudgeServer(gather=3) as server:
        async with aiohttp.ClientSession() as session:
            first = asyncio.gather(*(post(session, server.url, timeout=20) for _ in range(2)))
            while server.in_flight < 2:  # both arrived (the test's timeout bounds this wait)
                await asyncio.sleep(0.01)
            assert not server.gathered and server.served_ok == 0  # and both are held
            replies = [*await asyncio.gather(first, post(session, server.url, timeout=20))]
            later = await post(session, server.url)  # gathered once: served as usual
        assert server.gathered and server.most_in_flight == 3
    assert [r.outcome for r in [*replies[0], replies[1], later]] == ["ok"] * 4


async def test_gather_gives_up_after_its_timeout():
    with FakeJudgeServer(gather=2, gather_timeout_s=0.1) as server:
        async with aiohttp.ClientSession() as session:
            reply = await post(session, server.url, timeout=20)
        assert reply.outcome == "ok" and not server.gathered and server.most_in_flight == 1

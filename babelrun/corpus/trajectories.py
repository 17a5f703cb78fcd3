"""Reference agent trajectories (``kind: trajectories``): the bundled set, or a JSON Lines file
in the OpenAI chat or BFCL format (``babelrun/agentic/trajectory.py`` documents both).

Trajectories are not text references: ``read`` yields none, ``read_trajectories`` yields
``Trajectory`` objects, which ``corpus.select`` samples per language like references and the
plan turns into agentic items.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec

from ..core import languages
from ..errors import ManifestError


def _read(spec) -> Iterator:
    from ..agentic import bundled
    from ..agentic.trajectory import read_lines

    if spec.path is None:
        yield from bundled()
        return
    lang = languages.normalize(spec.language) if spec.language else ""
    answers = Path(spec.answers) if spec.answers else None
    for traj in read_lines(Path(spec.path).read_bytes(), spec.format, lang, answers):
        yield msgspec.structs.replace(traj, lang=languages.normalize(traj.lang))


SOURCE = ("BFCL question and possible-answer files are in github.com/ShishirPatil/gorilla, "
          "berkeley-function-call-leaderboard/data; OpenAI-chat lines are your own logs")


def check(spec, where: str) -> None:
    from ..agentic.trajectory import TrajectoryError

    for field in ("path", "answers"):
        value = getattr(spec, field)
        if value is not None and not Path(value).is_file():
            raise ManifestError(f"{where}.{field}", f"file not found: {value} ({SOURCE})")
    if spec.answers is not None and spec.format != "bfcl":
        raise ManifestError(f"{where}.answers", "only the bfcl format has a separate answers file")
    if spec.language is not None:
        languages.checked(spec.language, f"{where}.language")
    try:
        for _ in _read(spec):
            pass
    except TrajectoryError as e:
        raise ManifestError(f"{where}.path", str(e)) from None
    except ValueError as e:  # a line's lang that is not a language
        raise ManifestError(f"{where}.path", f"a trajectory's lang: {e}") from None


def read(spec) -> Iterator:
    """Trajectories hold no text references."""
    return iter(())


def read_trajectories(spec) -> Iterator:
    yield from _read(spec)

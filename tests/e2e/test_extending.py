"""Every recipe of docs/extending.md, followed as the page writes it, on a copy of the package.

The page's recipe blocks (a ``<!-- recipe: NAME -->`` line before a fenced block) are parsed
from the page itself, so the page and this test cannot drift: each block's first line names
its file; a block with ``...`` lines is an edit (its other lines are the file's own, found in
that order, or new lines, inserted where they stand among them); any other block is a new file
or is added at the end of the file it names. All of them are applied to a copy of ``babelrun/``
in a temporary folder (nothing is installed into the real tree), then one small audit runs in a
``python -m babelrun`` subprocess with ``PYTHONPATH`` at the copy, followed by the commands that
show each new thing: ``diff`` (the metric), the new analysis, ``report`` and the new command.
Each test checks that its recipe's new thing shows up, so a recipe missing a step fails here
(a step left out breaks the import, the audit, or the output its test reads).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "extending.md"
RECIPES = ("perturbation", "backend", "metric", "report-section", "analysis", "command")
_MARK = re.compile(r"^(?P<indent>[ ]*)<!-- recipe: (?P<name>[a-z-]+) -->\n(?P=indent)```python\n"
                   r"(?P<body>.*?)^(?P=indent)```$", re.M | re.S)
_GAP = ("...", "...,")


@dataclass(frozen=True)
class Step:
    recipe: str
    path: str  # relative to the package's parent folder: babelrun/...
    lines: list[str]  # the block without its first line (the file's name)


def steps(page: str) -> list[Step]:
    """The page's recipe blocks, in page order, dedented to their fence."""
    out = []
    for m in _MARK.finditer(page):
        indent = len(m["indent"])
        lines = [line[indent:] for line in m["body"].splitlines()]
        head = re.fullmatch(r"# (babelrun/[\w/.]+\.py)\b.*", lines[0])
        assert head, f"a {m['name']} recipe block does not start with its file's name: {lines[0]!r}"
        out.append(Step(m["name"], head[1], lines[1:]))
    return out


def _edit(source: list[str], block: list[str], where: str) -> list[str]:
    """``block``'s new lines put into ``source``: each known line (not new, not blank, not a
    gap) is found after the previous one; the new lines before a known line go right before
    it, those after the last known line right after it."""
    out, pos, pending, found = list(source), 0, [], False
    for line in block:
        if line.strip() in _GAP:
            continue
        at = next((i for i in range(pos, len(out)) if line.strip() and out[i].strip() == line.strip()), None)
        if at is None:
            pending.append(line)
            continue
        found = True
        out[at:at] = pending
        pos = at + len(pending) + 1
        pending = []
    assert found, f"{where}: none of the recipe's context lines is in the file"
    out[pos:pos] = pending
    return out


def apply(package_root: Path, step: Step) -> None:
    path = package_root / step.path
    if any(line.strip() in _GAP for line in step.lines):
        assert path.is_file(), f"{step.recipe}: the page edits {step.path}, which does not exist"
        text = "\n".join(_edit(path.read_text().splitlines(), step.lines, f"{step.recipe}: {step.path}"))
        path.write_text(text + "\n")
    elif path.is_file():
        path.write_text(path.read_text().rstrip("\n") + "\n\n\n" + "\n".join(step.lines).strip("\n") + "\n")
    else:
        path.write_text("\n".join(step.lines).strip("\n") + "\n")


def add_backend_option(judge: dict) -> dict:
    """The judge entry the backend recipe's judge is audited with: its own option ``reply``
    set away from its default, flat beside the common fields (``test_backend`` checks that it
    reached the judge and run.yaml)."""
    return {**judge, "reply": "B"}


MANIFEST = """\
name: extended
output_dir: run
seed: 1
judges: [{judge}]
corpus: {{sources: [{{kind: bundled}}], languages: [en, es], references_per_language: 3}}
scoring: {{bootstrap: 50}}
"""


@dataclass(frozen=True)
class Extended:
    folder: Path  # the manifest's folder; the run is ``run`` in it
    env: dict[str, str]  # PYTHONPATH at the copy

    @property
    def run(self) -> Path:
        return self.folder / "run"

    def babelrun(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "babelrun", *argv], cwd=self.folder, env=self.env,
                              capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def extended(tmp_path_factory) -> Extended:
    """The package copied, every recipe applied, and one audit: the run every test reads."""
    folder = tmp_path_factory.mktemp("extended")
    shutil.copytree(ROOT / "babelrun", folder / "pkg" / "babelrun", ignore=shutil.ignore_patterns("__pycache__"))
    for step in steps(PAGE.read_text()):
        apply(folder / "pkg", step)
    judge = add_backend_option({"name": "echo", "backend": "echo"})
    (folder / "manifest.yaml").write_text(MANIFEST.format(judge=json.dumps(judge)))
    env = {**os.environ, "PYTHONPATH": str(folder / "pkg"), "PYTHONDONTWRITEBYTECODE": "1"}
    made = Extended(folder, env)
    audited = made.babelrun("audit", "manifest.yaml", "--progress-every", "600")
    assert audited.returncode == 0, audited.stderr[-3000:]
    return made


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _cards(extended: Extended) -> dict:
    return json.loads((extended.run / "cards.json").read_text())


def test_the_page_has_a_step_for_every_recipe_and_the_real_tree_has_none_of_them():
    found = steps(PAGE.read_text())
    assert {s.recipe for s in found} == set(RECIPES)
    assert all(s.lines for s in found)
    import babelrun.perturb

    assert "rotate_sentences" not in babelrun.perturb.TEXT_PERTURBATIONS  # nothing installed here


def test_perturbation_is_planned_scored_and_among_the_defaults(extended):
    # The manifest names no perturbations: unset means every registered one, the new one included.
    judge = _cards(extended)["judges"][0]
    rows = {p["perturbation"] for lang in judge["languages"] for p in lang["perturbations"]}
    assert rows >= {"rotate_sentences", "truncate", "repeat_pad"}


def test_backend_judges_every_presentation(extended):
    judge = _cards(extended)["judges"][0]
    assert judge["judge"] == "echo"
    # Always slot B (its option ``reply: B``): both orders shown, so accuracy is one half and
    # the position bias -1; run.yaml keeps the option flat beside the common fields.
    assert judge["overall"]["accuracy"]["value"] == 0.5 and judge["overall"]["position_bias"]["value"] == -1.0
    assert "reply: B" in (extended.run / "run.yaml").read_text()


def test_metric_is_on_every_card_in_diff_and_accepted_by_its_gate(extended):
    judge = _cards(extended)["judges"][0]
    assert judge["overall"]["decisive_rate"]["value"] == 1.0  # echo never ties, never fails
    assert all(lang["card"]["decisive_rate"]["n"] > 0 for lang in judge["languages"])
    assert "| decisive |" in (extended.run / "report.md").read_text()
    drift = json.loads(_ok(extended.babelrun("diff", "run", "run", "--json", "--fail-if-worse", "decisive_rate")))
    changes = {c["metric"]: c for c in drift["judges"][0]["overall"]["changes"]}
    assert list(changes)[-1] == "decisive_rate" and changes["decisive_rate"]["delta"] == 0.0


def test_report_section_is_in_both_formats(extended):
    assert "## Judges audited\n\n- echo (" in (extended.run / "report.md").read_text()
    page = (extended.run / "report.html").read_text()
    assert "<h2>Judges audited</h2><ul><li>echo (<code>" in page and ">Judges audited</a>" in page


def test_analysis_is_a_command_a_file_and_a_report_section(extended):
    counts = json.loads(_ok(extended.babelrun("verdict-counts", "run", "--json")))
    assert set(counts["judges"]) == {"echo"} and sum(counts["judges"]["echo"].values()) > 0
    assert json.loads((extended.run / "verdict_counts.json").read_text()) == counts
    assert _ok(extended.babelrun("verdict-counts", "run")).startswith("echo: perturbed ")
    _ok(extended.babelrun("report", "run"))
    assert "Verdict counts" in (extended.run / "report.md").read_text()


def test_the_recipes_code_passes_the_linter(extended):
    pytest.importorskip("ruff")
    checked = subprocess.run([sys.executable, "-m", "ruff", "check", "--config", str(ROOT / "pyproject.toml"),
                              "babelrun"], cwd=extended.folder / "pkg", capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout[-3000:]


def test_command_runs_and_is_in_help(extended):
    assert _ok(extended.babelrun("hello", "run")) == "hello run\n"
    assert "hello" in _ok(extended.babelrun("--help"))

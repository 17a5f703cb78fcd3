"""Every judge shape through every command: ONE matrix, generated from the
registries. The shapes are declared in ``SHAPES`` below (one list); the commands are the
command table ``babelrun.app.cli.COMMANDS`` (the analyses registry's commands among them), so
a command added tomorrow is run on every shape the day it is added.

Each shape is audited once (module scope) on a tiny plan: the bundled corpus in two languages
(en, zh), two references each, one perturbation, and the bundled Judge-LS labelled pairs (two
per set, in both conditions), so that ``agree`` and ``invariance`` have something to work on;
bootstrap 0. Each cell then runs the command in-process on that run and asserts it **works**
(exit 0) or **refuses** with exit 2 and exactly one line naming why; a refusal must be one the
matrix expects (``REFUSES``), so a command that starts refusing a shape it used to serve fails
here too. A traceback, an exit 1 without a reason or two lines of refusal fail the cell.

Inputs a command needs besides the run are built here: agree's labels (a CSV of the run's own
labelled pairs), diff's second run (the run itself), check's lock (from ``pin``), bench-judge's
manifest (the shape's), calibrate's second judges (a companion run of two simulated judges
over the same plan)."""

from __future__ import annotations

import csv
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from babelrun import judges as judge_registry
from babelrun.app.cli import COMMANDS, main
from babelrun.testing import FakeJudgeServer
from helpers import simulated, write_manifest

# 18 tiny audits and 342 command runs (about 7 minutes on a busy 2-core machine): whole audits,
# so out of the fast loop (-m "not e2e") although a contract.
pytestmark = pytest.mark.e2e

CORPUS = {"sources": [{"kind": "bundled"}, {"kind": "labelled_pairs", "pairs_per_set": 2}],
          "languages": ["en", "zh"], "references_per_language": 2}
PERTURBATIONS = [{"name": "truncate", "severities": [0.5]}]
PAIR_VERDICT = {"pattern": r"\[\[([ABC])\]\]", "labels": {"A": "A", "B": "B", "C": "tie"}}

# The user's own code, importable as ``shapesjudge`` (sync and async callables) and an
# entry-point plugin ``shapes-echo`` (a dist-info on sys.path): put there for this module only.
USER_MODULE = '''
def longer(request):
    return "A" if len(request.answer_a) >= len(request.answer_b) else "B"

async def longer_async(request):
    return {"verdict": "A" if len(request.answer_a) >= len(request.answer_b) else "B", "raw": "async"}
'''
PLUGIN_MODULE = '''
from babelrun.judges import Capabilities, JudgeReply

class EchoJudge:
    capabilities = Capabilities(in_process=True)

    def __init__(self, spec, judge_id, seed):
        self.spec, self.judge_id = spec, judge_id

    async def judge(self, request):
        return JudgeReply(raw="A" if len(request.answer_a) > len(request.answer_b) else "B")

    async def aclose(self):
        pass
'''
PLUGIN = "shapes-echo"


def reason_first(text: str) -> str:
    """The fake server's judge for the reasoning template: it reasons, then gives ``[[A]]``
    or ``[[B]]`` for the longer answer (the template's markers cut the two answers out)."""
    a = text.split("[Answer A]", 1)[-1].split("[Answer B]", 1)[0]
    b = text.split("[Answer B]", 1)[-1]
    return (f"Answer A has {len(a)} characters and answer B {len(b)}; the longer one says more. "
            f"Verdict: [[{'A' if len(a) >= len(b) else 'B'}]]")


REASONING_PROMPT = {
    "system": "Compare the two answers. Reason step by step first; then give your verdict on its own line as "
              "[[A]], [[B]] or [[C]] for a tie.",
    "user": "[Question]\n{question}\n[Answer A]\n{answer_a}\n[Answer B]\n{answer_b}"}


@dataclass(frozen=True)
class Shape:
    """One judge shape: its judges (the first is the one under test), and composites over them."""

    name: str
    judges: Callable[[str], list[dict]]  # of the fake server's URL
    composites: list[dict] = field(default_factory=list)
    pairwise: bool = True
    soft: bool = False


def _one(judge: dict, pairwise: bool = True, soft: bool = False, name: str | None = None) -> Shape:
    return Shape(name or judge["name"], lambda url: [judge], pairwise=pairwise, soft=soft)


BASE = [
    _one(simulated("builtin-pairwise", default_accuracy=0.85)),
    Shape("reasoning-template", lambda url: [{"name": "reasoning-template", "backend": "openai", "model": "m",
                                              "endpoint": url, "prompt": REASONING_PROMPT,
                                              "verdict": PAIR_VERDICT}]),
    _one({**simulated("soft-pairwise", default_accuracy=0.8, position_bias=0.3), "soft": True}, soft=True),
    _one({**simulated("builtin-pointwise", score_noise=1.0), "protocol": "pointwise", "prompt": "pointwise"},
         pairwise=False),
    _one({**simulated("user-pointwise", score_noise=1.0), "protocol": "pointwise",
          "prompt": {"user": "Rate this answer from 1 to 10.\n{question}\n{answer}\nRating: [[n]]"},
          "verdict": {"pattern": r"Rating: \[\[(\d+)\]\]", "scale": [1, 10]}}, pairwise=False),
    _one({"name": "python-sync", "backend": "python", "callable": "shapesjudge:longer"}),
    _one({"name": "python-async", "backend": "python", "callable": "shapesjudge:longer_async"}),
    _one({"name": "plugin", "backend": PLUGIN}),
    _one({"name": "rule", "backend": "rule", "rule": {"kind": "length", "min_ratio": 1.1}}),
]


def _with_composites(base: Shape) -> Shape:
    """``base``'s judge under every composite that applies to it: dual order; an ensemble of it
    and two simulated judges (a soft vote where it is soft); a cascade from it to a strong judge
    asked on escalations only (on a soft margin where it is soft); calibrated (soft only)."""
    soft = {"soft": True} if base.soft else {}

    def judges(url: str) -> list[dict]:
        return [*base.judges(url), {**simulated("k1", default_accuracy=0.7), "model": "k1", **soft},
                {**simulated("k2", default_accuracy=0.7), "model": "k2", **soft},
                {**simulated("strong", default_accuracy=0.95), "model": "strong", "calls": "escalations"}]

    j = base.name
    composites = [{"kind": "dual_order", "name": f"{j}+dual", "of": j},
                  {"kind": "ensemble", "name": f"{j}+ensemble", "of": [j, "k1", "k2"],
                   **({"vote": "soft"} if base.soft else {})},
                  {"kind": "cascade", "name": f"{j}+cascade", "cheap": j, "strong": "strong",
                   **({"margin": 0.2} if base.soft else {})}]
    if base.soft:
        composites.append({"kind": "calibrated", "name": f"{j}+calibrated", "of": j, "calibration_share": 0.5})
    return Shape(f"{j}+composites", judges, composites, soft=base.soft)


def _mixed() -> Shape:
    """Composites and pointwise judges in one run (composite.derive must skip the pointwise)."""
    pairwise = _with_composites(BASE[2])  # the soft judge: every composite kind
    pointwise = [s.judges("")[0] for s in BASE if not s.pairwise]
    return Shape("mixed", lambda url: [*pairwise.judges(url), *pointwise], pairwise.composites, soft=True)


def _sampled() -> Shape:
    """A judge asked ``samples: 3`` (a sample index in every key, self-consistency on its cards,
    pin's baseline from its later samples) and the ``sampled`` composite over it (its majority)."""
    judge = {**simulated("sampled-pairwise", default_accuracy=0.8), "samples": 3}
    return Shape("sampled+composite", lambda url: [judge],
                 [{"kind": "sampled", "name": "sampled-pairwise+majority", "of": "sampled-pairwise"}])


SHAPES: list[Shape] = [*BASE, *(_with_composites(s) for s in BASE if s.pairwise), _mixed(), _sampled()]

# What a command refuses, and why (one line each): any other cell must work.
NO_FAMILY = "no judge declares a family"
POINTWISE = "every judge of the run is pointwise"
REFUSES: dict[str, Callable[[Shape], str | None]] = {
    # Self-preference needs judges that declare a family and pairs that name their outputs'.
    "self-preference": lambda shape: NO_FAMILY,
    # Analyses of slot verdicts have nothing to read in a run of pointwise judges alone.
    "invariance": lambda shape: None if shape.pairwise else POINTWISE,
    "agree": lambda shape: None if shape.pairwise else POINTWISE,
}


# ---- the runs -------------------------------------------------------------------------------


@dataclass
class Run:
    shape: Shape
    manifest: Path
    run_dir: Path
    folder: Path


@pytest.fixture(scope="module")
def user_code(tmp_path_factory):
    """``shapesjudge`` and the ``shapes-echo`` plugin on sys.path for this module; undone after."""
    site = tmp_path_factory.mktemp("site")
    (site / "shapesjudge.py").write_text(USER_MODULE)
    (site / "shapesplugin").mkdir()
    (site / "shapesplugin" / "__init__.py").write_text(PLUGIN_MODULE)
    info = site / "shapesplugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: shapesplugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[babelrun.judges]\n{PLUGIN} = shapesplugin:EchoJudge\n")
    sys.path.insert(0, str(site))
    yield site
    sys.path.remove(str(site))
    judge_registry.BACKENDS.pop(PLUGIN, None)
    for module in ("shapesjudge", "shapesplugin"):
        sys.modules.pop(module, None)


@pytest.fixture(scope="module")
def server():
    with FakeJudgeServer(reply=reason_first) as fake:
        yield fake


@pytest.fixture(scope="module")
def runs(tmp_path_factory, user_code, server):
    """Each shape's run, audited on first use (so a failing shape fails its own cells only)."""
    made: dict[str, Run] = {}

    def get(shape: Shape) -> Run:
        if shape.name not in made:
            folder = tmp_path_factory.mktemp(shape.name.replace("+", "-"))
            path = write_manifest(folder, shape.judges(server.url), composites=shape.composites, corpus=CORPUS,
                                  perturbations=PERTURBATIONS, scoring={"bootstrap": 0})
            code = main(["audit", str(path)])
            assert code == 0, f"auditing shape {shape.name} exited {code}"
            made[shape.name] = Run(shape, path, folder / "run", folder)
        return made[shape.name]

    return get


@pytest.fixture(scope="module")
def companion(tmp_path_factory):
    """Two simulated judges over the same plan: calibrate's other judges."""
    folder = tmp_path_factory.mktemp("companion")
    path = write_manifest(folder, [simulated("c1", default_accuracy=0.9), simulated("c2", default_accuracy=0.6)],
                          corpus=CORPUS, perturbations=PERTURBATIONS, scoring={"bootstrap": 0})
    assert main(["audit", str(path)]) == 0
    return folder / "run"


# ---- each command's arguments -------------------------------------------------------------


def _labels(run: Run, out: Path) -> str:
    """A labels CSV (item,label) for the run's labelled pairs: output 1 better for the first,
    2 for the second, and so on."""
    import babelrun

    table = babelrun.load_run(run.run_dir, ["kind", "ref_id"])
    ids = sorted({r for k, r in zip(table["kind"].to_pylist(), table["ref_id"].to_pylist(), strict=True)
                  if k == "labelled"})
    assert ids, "the plan has labelled pairs"
    path = out / "labels.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["item", "label"])
        writer.writerows([i, 1 + n % 2] for n, i in enumerate(ids))
    return str(path)


def _an_item(run: Run) -> str:
    import babelrun

    return babelrun.load_run(run.run_dir, ["item_id"])["item_id"][0].as_py()


def _check(run: Run, out: Path, companion: Path) -> int:
    lock = out / "judge.lock.json"
    code = main(["pin", str(run.run_dir), "--out", str(lock), "--canary", "4"])
    return code if code != 0 else main(["check", str(lock), "--manifest", str(run.manifest)])


# How each command is called on a shape's run; a command missing here is called with the run
# directory alone (a new analysis takes one), so it is covered before anyone writes its line.
ARGS: dict[str, Callable[[Run, Path, Path], list[str] | int]] = {
    "audit": lambda r, t, c: ["audit", str(r.manifest)],
    "validate": lambda r, t, c: ["validate", str(r.manifest)],
    "languages": lambda r, t, c: ["languages", str(r.manifest)],
    "report": lambda r, t, c: ["report", str(r.run_dir), "--no-html", "--out", str(t)],
    "calibrate": lambda r, t, c: ["calibrate", str(r.run_dir), str(c), "--replicates", "5", "--json"],
    "invariance": lambda r, t, c: ["invariance", str(r.run_dir), "--json"],
    "agree": lambda r, t, c: ["agree", str(r.run_dir), _labels(r, t), "--json"],
    "diff": lambda r, t, c: ["diff", str(r.run_dir), str(r.run_dir), "--fail-if-worse", "--json"],
    "show": lambda r, t, c: ["show", str(r.run_dir), _an_item(r), "--json"],
    "export": lambda r, t, c: ["export", str(r.run_dir), "--out", str(t)],
    "pin": lambda r, t, c: ["pin", str(r.run_dir), "--out", str(t / "lock.json"), "--canary", "4"],
    "check": lambda r, t, c: _check(r, t, c),
    "bench-judge": lambda r, t, c: ["bench-judge", str(r.manifest), "--sample", "2", "--seconds", "0.01",
                                    "--min-calls", "2", "--max-concurrency", "2", "--json"],
    "cache": lambda r, t, c: ["cache", "stats", str(t)],  # the response cache is the judge's, not the run's
    "data": lambda r, t, c: ["data", "list"],  # the public data sets, not the run's (offline: what is known and here)
}

CELLS = [(s, c.name) for s in SHAPES for c in COMMANDS]


def test_the_matrix_covers_every_shape_and_every_command():
    assert {c for _, c in CELLS} == {c.name for c in COMMANDS}
    from babelrun.analyses.registry import ANALYSES

    assert {a.name for a in ANALYSES} <= {c for _, c in CELLS}  # the analyses registry's, too
    assert len(CELLS) == len(SHAPES) * len(COMMANDS) and len({s.name for s in SHAPES}) == len(SHAPES)
    assert set(ARGS) <= {c.name for c in COMMANDS}  # no stale entry


@pytest.mark.parametrize("shape,command", CELLS, ids=[f"{s.name}-{c}" for s, c in CELLS])
def test_each_command_works_or_refuses_in_one_line(shape, command, runs, companion, tmp_path, capsys):
    run = runs(shape)
    capsys.readouterr()
    argv = ARGS.get(command, lambda r, t, c: [command, str(r.run_dir)])(run, tmp_path, companion)
    code = argv if isinstance(argv, int) else main(argv)
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("babelrun: error: ")]
    expected = REFUSES.get(command, lambda s: None)(shape)
    if expected is None:
        assert code == 0, f"{command} on {shape.name} exited {code}: {err[-2000:]}"
        assert not errors, err
    else:
        assert code == 2, f"{command} on {shape.name} should refuse ({expected}), exited {code}: {err[-2000:]}"
        assert len(errors) == 1 and err.count("\n") == 1 and expected in errors[0], err
    shutil.rmtree(tmp_path, ignore_errors=True)

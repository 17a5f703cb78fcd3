"""The analyses of a finished run, one entry each: the one place that says what an analysis
is called, what it writes, how it is asked for on the command line and how it is shown.

Everything that lists analyses iterates ``ANALYSES`` (in this order):

- the command line (``babelrun.app.cli.analyses``): one command per entry, its parser built
  there from ``arguments`` (data: ``Argument``; nothing here knows argparse), ``--json`` added to
  every one, the result computed by ``compute`` from the parsed values, written as ``output`` in
  each run directory it read (``run_dirs``), printed with ``text``, the exit code from ``gate``;
- the report (``report.data``): each run directory's ``output`` decoded as ``result_type``
  (``RunReport.analyses[name]``), flagged when it predates the log's newest records (the
  staleness check), and shown as the section titled ``title`` in report.md and report.html;
  ``spans_runs``: one result over several runs (written into each), shown once.

The analysis code itself is imported only when an entry is used (``module``), so building the
command line loads no analysis (numpy, pyarrow). A new analysis is a module in this package and
one entry below (docs/extending.md, *An analysis*); the report shows it (its ``text`` under
``title``) until a format gives it a table of its own (``report.html._ANALYSES`` /
``report.markdown._ANALYSES``, keyed by name).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Argument:
    """One command-line argument of an analysis, as data: the command line
    (``app/cli/analyses.py``) makes the parser's argument from it. Its value reaches ``compute``
    under ``dest`` (``--min-kappa``: ``min_kappa``)."""

    name: str  # a positional's name (``run_dir``), or an option (``--pivot``)
    type: Callable[[str], Any] = str
    help: str | None = None
    metavar: str | None = None
    many: bool = False  # a positional given one or more times: a list
    optional: bool = False  # a positional that may be left out (its value is then None)
    default: Any = None  # an option's value when it is not given

    @property
    def dest(self) -> str:
        return self.name.lstrip("-").replace("-", "_")


# The parsed arguments of an analysis's command, by ``Argument.dest``.
Values = Mapping[str, Any]


@dataclass(frozen=True)
class Analysis:
    name: str  # the command: ``babelrun NAME``
    output: str  # the file it writes into each run directory it read
    module: str  # the module (dotted name) of its ``text(result)`` and its result type
    result: str  # the result type's name in that module
    title: str  # its report section's heading
    help: str
    description: str
    arguments: tuple[Argument, ...]  # its own arguments (``--json`` is added)
    compute: Callable[[Values], Any]  # the result, from the parsed arguments
    run_dirs: Callable[[Values], Sequence[Path]] = field(default=lambda args: [args["run_dir"]])
    # A CI gate (exit 1): (the reasons it tripped, one line each; what they are), or None
    # where the arguments ask for no gate. None: the analysis has no gate.
    gate: Callable[[Values, Any], tuple[list[str], str] | None] | None = None
    spans_runs: bool = False

    def code(self) -> Any:
        return import_module(self.module)

    @property
    def result_type(self) -> type:
        return getattr(self.code(), self.result)  # type: ignore[no-any-return]

    def text(self, result: Any) -> str:
        return self.code().text(result)  # type: ignore[no-any-return]


RUN_DIR = (Argument("run_dir", Path),)


# -- calibrate ------------------------------------------------------------------------------

CALIBRATE_ARGUMENTS = (
    Argument("run_dirs", Path, many=True, metavar="RUN_DIR"),
    Argument("--replicates", int, "task-bootstrap replicates (default 200)", default=200),
    Argument("--seed", int, default=0),
)


def _calibrate(args: Values) -> Any:
    from . import calibrate

    return calibrate.run(args["run_dirs"], replicates=args["replicates"], seed=args["seed"])


# -- invariance -----------------------------------------------------------------------------

INVARIANCE_ARGUMENTS = (
    *RUN_DIR,
    Argument("--pivot", help="the pivot language or condition (default: the run's corpus.parallel.pivot, else en)"),
    Argument("--audit-min-length-ratio", float, metavar="R",
             help="transformation audit: flag a variant whose text is shorter than R times the "
             "pivot's, in characters (default 0.15)"),
    Argument("--audit-max-number-change", int, metavar="N",
             help="transformation audit: flag a variant whose count of numbers differs from the "
             "pivot's by more than N (default 1)"),
)


def _invariance(args: Values) -> Any:
    import msgspec

    from ..errors import NotApplicable
    from ..store.rundir import read_run_info
    from . import invariance
    from .judge_ls import AuditRules

    run_dir = args["run_dir"]
    info = read_run_info(run_dir)
    parallel = info.manifest.corpus.parallel
    pivot = args["pivot"] or (parallel.pivot if parallel else "en")
    rules = AuditRules()
    if args["audit_min_length_ratio"] is not None:
        rules = msgspec.structs.replace(rules, min_length_ratio=args["audit_min_length_ratio"])
    if args["audit_max_number_change"] is not None:
        rules = msgspec.structs.replace(rules, max_number_change=args["audit_max_number_change"])
    result = invariance.run(run_dir, pivot, rules=rules)
    if not any(r.matched for r in result.rows) and not result.code_switched and not result.tie_probes \
            and result.labelled is None:
        raise NotApplicable(f"{run_dir}: no unit was judged both in {pivot} and in another language "
                            "(is the corpus parallel, UDHR or FLORES, or labelled pairs in several conditions, "
                            "with the pivot among them?)")
    return result


# -- agree ----------------------------------------------------------------------------------

AGREE_ARGUMENTS = (
    *RUN_DIR,
    Argument("labels", Path, optional=True, metavar="LABELS",
             help="a label file (a table: CSV, JSON, JSON Lines; or LLMBar dataset.json / folder); "
                  "left out: the run's own labelled sources, with their columns and label_map"),
    Argument("--columns", str, metavar="YAML",
             help="the label file's column for each field, as a labelled_pairs source's columns: "
                  "'{id: pair, label: winner, annotator: judge}'"),
    Argument("--label-map", str, metavar="YAML",
             help="the file's label words to 1, 2 or tie: '{model_a: 1, model_b: 2, tie: tie}'"),
    Argument("--join", str, metavar="YAML",
             help="texts kept in other files, as a labelled_pairs source's join: "
                  "'[{path: q.jsonl, by: {qid: id}, columns: {input: text}}]'"),
    Argument("--min-kappa", float, metavar="K",
             help="exit 1 when a judge's kappa (both orders, all sets) is below K or undefined"),
)


def _label_options(args: Values) -> Any:
    """The label file's source options from --columns, --label-map and --join (YAML text)."""
    import msgspec

    from ..corpus import labelled
    from ..errors import UsageError
    from ..spec import JoinSpec
    from .agree import LabelOptions

    types: dict[str, Any] = {"columns": dict[str, str | list[str]], "label_map": dict[int | str, int | str],
                             "join": list[JoinSpec]}
    given = {k: args[k] for k in ("columns", "label_map", "join") if args.get(k) is not None}
    if given and args["labels"] is None:
        raise UsageError("--columns, --label-map and --join read a label file: give LABELS (the run's own "
                         "sources carry their own)")
    fields = {}
    for key, text in given.items():
        option = "--" + key.replace("_", "-")
        try:
            fields[key] = msgspec.yaml.decode(text.encode(), type=types[key])
        except (msgspec.ValidationError, msgspec.DecodeError) as e:
            raise UsageError(f"{option}: {' '.join(str(e).split())[:200]}") from None
    for name in fields.get("columns", {}):
        if name not in labelled.TABLE_FIELDS:
            raise UsageError(f"--columns: unknown field {name!r} (fields: {', '.join(labelled.TABLE_FIELDS)})")
    return LabelOptions(**fields)


def _agree(args: Values) -> Any:
    import sys

    from ..errors import NotApplicable, UsageError
    from . import agree

    kappa = args["min_kappa"]
    if kappa is not None and not -1 <= kappa <= 1:  # NaN too: a gate never silently off
        raise UsageError("--min-kappa must be a number in [-1, 1]")
    result = agree.run(args["run_dir"], args["labels"], options=_label_options(args))
    labelled_pairs = result.matched + result.unknown.count + result.mismatched.count + result.no_records.count
    if result.matched == 0:
        raise NotApplicable(f"no label in {result.labels} matches a pair judged in {args['run_dir']} "
                            f"({result.labels_read} labels read, {result.unknown.count} unknown ids, "
                            f"{result.mismatched.count} with other outputs)")
    if result.matched < labelled_pairs:
        print(f"babelrun: warning: {result.matched} of {labelled_pairs} labelled pairs in {result.labels} match "
              f"a judged pair ({result.unknown.count} unknown ids, {result.mismatched.count} with other outputs, "
              f"{result.no_records.count} without records)", file=sys.stderr)
    return result


def _agree_gate(args: Values, result: Any) -> tuple[list[str], str] | None:
    from . import agree

    kappa = args["min_kappa"]
    return None if kappa is None else (agree.below(result, kappa), "below --min-kappa")


# -- self-preference ------------------------------------------------------------------------

def _self_preference(args: Values) -> Any:
    from ..store.rundir import read_run_info
    from . import selfpref

    read_run_info(args["run_dir"])
    return selfpref.run(args["run_dir"])


ANALYSES: tuple[Analysis, ...] = (
    Analysis(
        "calibrate", "calibration.json", "babelrun.analyses.calibrate",
        "Calibration", "Cross-lingual bias calibration (CBC)",
        help="CBC: remove judges' language-specific bias",
        description="From several judges audited over the same languages and "
        "perturbations (one or more run directories): the judge x language means, "
        "their language x judge interaction (double-centred), calibrated scores, "
        "per-language rankings before and after, held-out cross-language rank "
        "agreement (Kendall tau) under a task bootstrap, and rank reversals "
        "(Benjamini-Hochberg adjusted). Also written to RUN_DIR/calibration.json "
        "(each RUN_DIR), which babelrun report shows.",
        arguments=CALIBRATE_ARGUMENTS, compute=_calibrate, run_dirs=lambda args: args["run_dirs"],
        spans_runs=True),
    Analysis(
        "invariance", "invariance.json", "babelrun.analyses.invariance",
        "Invariance", "Language-switch invariance",
        help="language-switch flip rates on a parallel corpus or labelled pairs",
        description="For a run over a parallel corpus (UDHR, FLORES): per judge "
        "and language, how often the verdict and its correctness flip between the "
        "pivot language and that language for the same unit, perturbation and "
        "order, with Wilson intervals and an exact McNemar test. For labelled pairs in "
        "several conditions (Judge-LS): strict and tie-half accuracy, flips against the "
        "pivot condition, position inconsistency, per subset, and a transformation audit "
        "with every figure given for all pairs and for audit-passing pairs. Also written "
        "to RUN_DIR/invariance.json, which babelrun report shows.",
        arguments=INVARIANCE_ARGUMENTS, compute=_invariance),
    Analysis(
        "agree", "agreement.json", "babelrun.analyses.agree",
        "Agreement", "Agreement with human labels",
        help="agreement of a run's verdicts with human labels",
        description="Compare the judges' verdicts on a run's labelled pairs with "
        "human labels: the run's own labelled sources (no LABELS), or a label file read "
        "like a labelled_pairs source (a CSV, JSON or JSON Lines table in its own column "
        "names with --columns, --label-map and --join; item,label or item,annotator,label "
        "as they are; an LLMBar dataset.json or folder), labels 1, 2 or tie after the "
        "mapping: agreement with a Wilson interval, Cohen's kappa with its Landis-Koch "
        "band, class rates and n, per order and both orders, and the human-human "
        "ceiling where pairs have several annotators. Also written to "
        "RUN_DIR/agreement.json, which babelrun report shows.",
        arguments=AGREE_ARGUMENTS, compute=_agree, gate=_agree_gate),
    Analysis(
        "self-preference", "self_preference.json", "babelrun.analyses.selfpref",
        "SelfPreference", "Self-preference",
        help="how much each judge favours its own model family's answers",
        description="For judges that declare a family (family: in the manifest) and labelled "
        "pairs whose outputs name theirs (family_1, family_2): how often the judge names the "
        "worse output when its own family wrote it, against when its family wrote neither; "
        "the difference (Newcombe interval, Fisher exact p), the self-preference share with a "
        "bootstrap interval, a paired McNemar test against the other families' judges on the "
        "same presentations, and all of it again on pairs where the worse output is not the "
        "longer. Also written to RUN_DIR/self_preference.json, which babelrun report shows.",
        arguments=RUN_DIR, compute=_self_preference),
)


def outputs() -> tuple[str, ...]:
    """Every analysis's file name, in registry order (the report's staleness check)."""
    return tuple(a.output for a in ANALYSES)

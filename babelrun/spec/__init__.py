"""The manifest's types: what to audit, as typed, frozen msgspec Structs (types only).

Decoding is strict: unknown keys and wrong types are errors naming the field path
(``judges[1].rate_limit.rpm: expected `float`, got `str```). Nothing in a manifest executes
code, and secrets never live in it: a judge names the environment variable holding its key.
Loading and the checks that need the registries (backends, loaders, perturbations) are in
``babelrun.manifest``, a layer above everything they consult.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import msgspec

from ..core.bounds import MAX_SAMPLES
from ._base import *  # noqa: F403 (the shared base and bounds, re-exported)
from ._base import (
    DEFAULT_SEVERITIES,
    MAX_BOOTSTRAP,
    MAX_CONCURRENCY,
    MAX_FSYNC_INTERVAL_S,
    MAX_RETRIES,
    MAX_RPM,
    MAX_SEGMENT_MB,
    MAX_TIMEOUT_S,
    MAX_TPM,
    MAX_WORKERS,
    PositiveInt,
    Probability,
    Severity,
    _Spec,
)
from .corpus import *  # noqa: F403 (the corpus section's types, re-exported)
from .corpus import CorpusSpec, JoinSpec
from .options import JudgeOptions as JudgeOptions  # the base of a backend's options, public here

# ---- perturbations ------------------------------------------------------------------------


class BaseSpec(_Spec, frozen=True):
    """The degradation a cue probe's worse answer starts from (``perturbations[i].base``)."""

    name: str = "truncate"
    severity: Severity = 0.6


class PerturbationSpec(_Spec, frozen=True):
    name: str
    severities: list[Severity] = msgspec.field(default_factory=lambda: list(DEFAULT_SEVERITIES))
    # Robustness probes (``babelrun/perturb/probes.py``; ``severities`` does not apply to them).
    # ``base``: the cue probes' (authority, bandwagon, injection, refinement) degraded answer,
    # default truncate at 0.6. ``cue_language``: the cue in the item's language (``item``; the
    # English cue, recorded as code-switched, where a language has no translation), in English
    # (``en``), or both. ``cues``: a user's cue file (JSON or YAML, the bundled file's shape),
    # whose texts replace the bundled ones per (language, probe).
    base: BaseSpec | None = None
    cue_language: Literal["item", "en", "both"] = "item"
    cues: str | None = None


class AgenticSpec(_Spec, frozen=True):
    """How the corpus's trajectories are degraded and shown: ``focus`` is what the judge
    reads (``tool_calls``: calls, results and the final answer; ``full_trace``: thoughts
    too). ``perturbations`` unset (None): every registered agentic perturbation at the default
    severities, filled in by the manifest layer (``babelrun.manifest.agentic_perturbations``:
    the registries live in layers above this one)."""

    focus: Literal["tool_calls", "full_trace"] = "full_trace"
    perturbations: list[PerturbationSpec] | None = None


# ---- judges -------------------------------------------------------------------------------


class RateLimit(_Spec, frozen=True):
    """The provider account's limits. Judges on one account (same endpoint and key variable)
    share one budget; where they state different limits, the smaller holds."""

    rpm: Annotated[float, msgspec.Meta(ge=1, le=MAX_RPM)] | None = None  # requests per minute
    tpm: Annotated[float, msgspec.Meta(ge=1, le=MAX_TPM)] | None = None  # tokens per minute (in + out)


class FlatSection(_Spec, frozen=True):
    """A group of a judge's common fields that the manifest writes flat, beside the others
    (``timeout_s: 30``, never ``limits: {timeout_s: 30}``): ``babelrun.spec.flat`` nests them
    to decode and flattens them to write (run.yaml, lock files), as it does a backend's options.
    An error names the flat field (``judges[1].timeout_s``)."""


class CallLimitsSpec(FlatSection, frozen=True):
    """How fast a judge's calls go and when they are given up on (``engine/limits.py``). None
    of it changes a verdict, so none of it is in the judge_id."""

    # calls in flight (the ceiling, with adaptive_concurrency)
    concurrency: Annotated[int, msgspec.Meta(ge=1, le=MAX_CONCURRENCY)] = 8
    adaptive_concurrency: bool = False  # start low, grow until the provider pushes back
    rate_limit: RateLimit = RateLimit()
    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=MAX_TIMEOUT_S)] = 60.0
    retries: Annotated[int, msgspec.Meta(ge=0, le=MAX_RETRIES)] = 5
    max_consecutive_failures: PositiveInt = 10  # calls failed in a row before the judge stops


MAX_PRICE_PER_MTOK = 1e6  # per million tokens: finite, far above any provider's (nan and inf are refused)
_PerMtok = Annotated[float, msgspec.Meta(ge=0, le=MAX_PRICE_PER_MTOK)]


class Price(_Spec, frozen=True):
    """What a judge's provider charges, per million tokens, for ``babelrun validate``'s cost
    estimate. Never part of the judge's identity (it cannot change a verdict). Every price is
    a finite number of at least 0: ``.inf`` or ``.nan`` would make every total unusable."""

    input_per_mtok: _PerMtok
    output_per_mtok: _PerMtok = 0.0
    currency: str = "USD"
    # Input tokens the provider served from its prompt cache (unset: billed as input).
    cached_input_per_mtok: _PerMtok | None = None
    batch_discount: Annotated[float, msgspec.Meta(ge=0, lt=1)] = 0.0  # a provider batch's share off (0.5: half price)
    # Input tokens written to the provider's prompt cache (Anthropic's cache_creation_input_tokens);
    # unset: 1.25 × input_per_mtok, Anthropic's price for a 5-minute cache write.
    cache_write_per_mtok: _PerMtok | None = None


class SimulatedKnobs(_Spec, frozen=True):
    """Explicit biases of the ``simulated`` judge: the numbers the metrics must recover.

    On each decisive reply the judge picks slot A with probability ``|position_bias|``
    (slot B when negative), else the longer answer with probability ``verbosity_bias``, else
    the reference with probability ``accuracy`` (per language, falling back to ``default``).
    """

    accuracy: dict[str, float] = {}  # range checked in check(), to name the language
    default_accuracy: Probability = 0.9
    position_bias: Annotated[float, msgspec.Meta(ge=-1.0, le=1.0)] = 0.0
    verbosity_bias: Probability = 0.0
    invalid_rate: Probability = 0.0
    tie_rate: Probability = 0.0
    latency_ms: Annotated[float, msgspec.Meta(ge=0, le=MAX_TIMEOUT_S * 1000)] = 0.0
    # Judges with the same noise key draw the same random numbers, so with the same knobs
    # they make the same errors (an ensemble of copies); unset, each judge draws its own.
    noise: str | None = None
    # Accuracy on one perturbation's items instead of the language's (``hallucinated_tool``
    # or ``agent:hallucinated_tool``: a judge blind to invented tools at 0.5). Left out of
    # the judge_id while empty.
    accuracy_by_perturbation: dict[str, float] = {}
    # With this probability a decisive reply names the answer written by the judge's own
    # model family (the judge's ``family``), where exactly one of the two answers is (the
    # item's ``ref_family`` / ``pert_family``); after position and verbosity bias, before
    # accuracy. Left out of the judge_id at 0.
    self_preference: Probability = 0.0
    # Pointwise (``protocol: pointwise``): the reference scores ``score_reference`` (unset:
    # two thirds up the verdict's scale), a degraded answer ``score_drop`` less; plus
    # ``length_gain`` per doubling of length against the reference (log2 of the ratio), plus
    # ``scale_offset[lang]``, plus N(0, ``score_noise``); rounded to the scale's integers and
    # clipped to it. ``invalid_rate`` applies as in pairwise. All left out of the judge_id
    # while they hold their defaults.
    score_reference: float | None = None
    score_drop: Annotated[float, msgspec.Meta(ge=0)] = 2.0
    score_noise: Annotated[float, msgspec.Meta(ge=0)] = 1.0
    length_gain: float = 0.0
    scale_offset: dict[str, float] = {}
    # Robustness probes: per probe, the share of presentations where the judge names the cued
    # (worse) answer whatever its quality (``ProbeKnobs``). Left out of the judge_id while unset.
    probes: ProbeKnobs | None = None
    # With this probability a decisive pairwise reply names the answer in the item language's
    # own script where the other is in Latin script (the ``romanised`` probe: the native-script
    # degraded answer over the romanised reference); in the probes' window, before accuracy.
    # Left out of the judge_id at 0.
    script_bias: Probability = 0.0


class ProbeKnobs(_Spec, frozen=True):
    """The simulated judge's susceptibility to each robustness probe: with this probability a
    decisive reply names the answer that carries the cue (the master key's non-answer), after
    position and verbosity bias, before accuracy; pointwise, the cued answer scores as the
    reference would. ``self_match`` has no knob: ``tie_rate`` and ``position_bias`` set it."""

    authority: Probability = 0.0
    bandwagon: Probability = 0.0
    injection: Probability = 0.0
    refinement: Probability = 0.0
    master_key: Probability = 0.0


class PromptPart(_Spec, frozen=True):
    """One message of a prompt from its own source (``prompt: {system: {…}, user: {…}}``):
    inline ``text``, or a ``file``'s text, or with ``name`` one text in it (a ``.py`` file's
    string constant, parsed, never imported; a YAML/JSON key whose value is text)."""

    text: str | None = None
    file: str | None = None
    name: str | None = None


class PromptSpec(_Spec, frozen=True):
    """A judge's own prompt template (``prompt:`` as a mapping): inline ``system`` and
    ``user`` text, or one template of a file (``file`` + ``name``: a JSONL/YAML/JSON collection
    such as MT-Bench's ``judge_prompts.jsonl``, a string constant or prompt dict of a ``.py``
    file), or ``system`` and ``user`` each from a source of its own (``PromptPart``). The
    manifest loader reads files into ``system``/``user`` (``source`` keeps where from, for the
    report; it is not part of ``judge_id``). Fields are babelrun's names: pairwise
    ``question``, ``answer_a``, ``answer_b``; pointwise ``question``, ``answer``; both may use
    ``reference`` (the corpus's ``reference_answer`` column) and ``language``.

    ``syntax``: ``str.format`` or Jinja2 (kept as ``jinja2`` where it needs Jinja2, rendered in
    judges/jinja.py's sandbox), detected (``auto``). ``fields`` maps the template's own names to
    babelrun's (``{response_A: answer_a}``); a key that is not a name is a placeholder written
    out (WildBench's ``{$user_query}``), replaced as plain text."""

    system: str | PromptPart = ""
    user: str | PromptPart | None = None
    file: str | None = None
    name: str | None = None
    source: str | None = None
    # Text for a tool's own fields (promptfoo's {{ rubric }}), which may use the fields above.
    vars: dict[str, str] = {}
    fields: dict[str, str] = {}
    syntax: Literal["auto", "format", "jinja2"] = "auto"


class VerdictSpec(_Spec, frozen=True):
    """How the judge's reply is read: ``pattern`` is a regex whose first group is the label;
    ``match`` picks the first or the last match (default last: explanations come first).
    Pairwise: ``labels`` maps captured text to A, B or tie (``{A: A, B: B, C: tie}``, or
    Arena-Hard's ``{A>>B: A, A>B: A, A=B: tie, B>A: B, B>>A: B}``; exact, case-sensitive, after
    trimming spaces). Pointwise: the group is a number inside ``scale: [lo, hi]``, or a label
    that ``labels`` maps to a score (``{C: 1, I: 0}``; ``values`` is the older name of the same
    map, and the loader moves pointwise ``labels`` there). No match, an unmapped label or an
    out-of-scale number: invalid.
    ``reply``: how the simulated judge writes a verdict (``Rating: [[{label}]]``); derived
    from a simple ``pattern`` when unset.
    ``scores`` (pairwise, in place of ``pattern``): a regex whose first two groups are the
    scores of answer A and answer B (JudgeLM's ``8 6``, ``[[8, 6]]``); the higher wins, equal
    scores are a tie. A soft judge (``soft: true``) takes ``labels`` alone: the label tokens
    whose probabilities it reads (AlpacaEval's ``{m: A, M: B}``)."""

    pattern: str = ""
    match: Literal["first", "last"] = "last"
    labels: dict[str, Literal["A", "B", "tie"] | float] = {}  # pairwise: a slot; pointwise: a score
    scale: tuple[float, float] | None = None
    values: dict[str, float] = {}  # pointwise labels and their scores ({C: 1, P: 0.5, I: 0})
    reply: str | None = None
    scores: str | None = None  # pairwise two-score replies: groups 1 and 2 are A's and B's scores


class AzureSpec(_Spec, frozen=True):
    """Azure OpenAI: the deployment (in the URL, in place of the model) and the API version
    (``api-version`` query parameter); the key goes in the ``api-key`` header."""

    deployment: str
    api_version: str = "2024-10-21"


class RuleSpec(_Spec, frozen=True):
    """A deterministic judge (``backend: rule``, babelrun/judges/rule.py): each answer gets a
    score, the higher one wins; a gap under ``margin`` (or equal scores) is a tie, which a
    cascade escalates to its strong judge.

    ``length``: the score is the answer's length in characters, and a tie unless the longer
    is at least ``min_ratio`` times the shorter. ``regex``: 1 where ``pattern`` matches the
    answer (re.search), else 0. ``exact_match``: 1 where the answer, trimmed and case-folded,
    equals ``expected``. ``json``: 1 where the answer parses as JSON (and holds the
    ``required`` keys of an object), else 0. ``python``: the function registered under
    ``function`` with ``babelrun.judges.rule.register`` (a manifest names code, never holds it).
    """

    kind: Literal["length", "regex", "exact_match", "json", "python"]
    min_ratio: Annotated[float, msgspec.Meta(ge=1.0)] = 1.5
    pattern: str | None = None
    expected: str | None = None
    required: list[str] = []
    function: str | None = None
    margin: Annotated[float, msgspec.Meta(ge=0.0)] = 0.0


class ReplaySpec(_Spec, frozen=True):
    """``backend: replay``: verdicts read from a file instead of asked for (judges/replay.py).
    ``path``: babelrun's own export (``presentations`` of ``babelrun export``), a generic
    table ``{id, order | swap, verdict | winner | score, raw?}`` (JSON Lines, CSV or Parquet),
    or LLMBar's evaluator outputs (``result.json``). ``judge``: which judge of an export with
    several (its name)."""

    path: str
    judge: str | None = None
    # A verdict table in its own column names (read by corpus/pairtable.py): {field: column}
    # for output_1, output_2, decision, decision_swapped, raw, raw_swapped, model_1, model_2,
    # turn, judge; join: texts kept in other files; label_map: the file's decision words to
    # A, B, tie (the slot shown first / second) or 1, 2 (the data's output).
    columns: dict[str, str | list[str]] = {}
    join: list[JoinSpec] = []
    label_map: dict[str, str] | None = None


class JudgeSpec(_Spec, frozen=True):
    """The fields every judge has, whatever its backend; the backend's own are ``options``."""

    name: str
    # A registered backend (``babelrun.judges.BACKENDS``) or an entry-point plugin's name.
    backend: str
    model: str = ""
    endpoint: str | None = None  # base URL of an OpenAI-compatible API, e.g. http://host/v1
    api_key_env: str | None = None
    # A built-in template name (pairwise, pairwise_length_neutral, pointwise), a path to a
    # text file (the user message), or a PromptSpec mapping (inline text, or file + name).
    prompt: str | PromptSpec = "pairwise"
    # pairwise: two answers per call, in both slot orders; pointwise: one answer per call,
    # scored on the verdict's scale (the reference and the degraded answer separately).
    protocol: Literal["pairwise", "pointwise"] = "pairwise"
    verdict: VerdictSpec | None = None  # unset: the strict built-in parser (built-in templates)
    # The judge's instructions in English, or in each item's language where the template is
    # written in it (en es fr yo hi bn ar sw zh ja tr ru; English elsewhere).
    prompt_language: Literal["en", "item"] = "en"
    temperature: Annotated[float, msgspec.Meta(ge=0, le=100)] = 0.0
    # Each presentation asked this many times (a sample index in the key, 0 … k−1): the
    # judge's self-consistency and the ``sampled`` composite come from them. Not part of the
    # judge_id: raising it adds keys, never changes the ones judged.
    samples: Annotated[int, msgspec.Meta(ge=1, le=MAX_SAMPLES)] = 1
    # Sent with each request (where the API takes one) as a hash of this, the item, the order
    # and the sample index (``core.keys.sample_seed``): distinct samples, the same on a resume.
    seed: Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)] | None = None
    # Unset: 8 for the built-in pairwise templates (one word), 1024 where the judge reasons
    # first (a ``verdict:`` pattern, the pointwise template).
    max_tokens: PositiveInt | None = None
    # Soft verdict: one forward pass of one token with log-probabilities gives P(A), P(B),
    # P(tie); the verdict is their argmax. Backends that declare logprobs only.
    soft: bool = False
    # concurrency, adaptive_concurrency, rate_limit, timeout_s, retries, max_consecutive_failures:
    # written flat in the manifest, read as ``spec.timeout_s`` (the properties below).
    limits: CallLimitsSpec = CallLimitsSpec()
    # all: every planned key; escalations: only the presentations a cascade escalates to
    # this judge (its strong judge), asked after the cheap judge has answered. Such a judge
    # sees a hard subset, so it gets no card of its own.
    calls: Literal["all", "escalations"] = "all"
    # The judge's model family (``llama``, ``gpt``, ``claude``, …), for the self-preference
    # card: how often it prefers answers its own family wrote. Not part of the judge_id
    # (it changes no verdict).
    family: str | None = None
    price: Price | None = None  # per million tokens: validate estimates the audit's cost
    # Read the price from a YAML/JSON file of ``{model: {input_per_mtok: …}}`` (when ``price`` is unset).
    price_file: str | None = None
    # The backend's own options (its registered struct), written flat in the manifest.
    options: JudgeOptions = JudgeOptions()

    @property
    def concurrency(self) -> int:
        return self.limits.concurrency

    @property
    def adaptive_concurrency(self) -> bool:
        return self.limits.adaptive_concurrency

    @property
    def rate_limit(self) -> RateLimit:
        return self.limits.rate_limit

    @property
    def timeout_s(self) -> float:
        return self.limits.timeout_s

    @property
    def retries(self) -> int:
        return self.limits.retries

    @property
    def max_consecutive_failures(self) -> int:
        return self.limits.max_consecutive_failures


# ---- composite (mitigation) judges ---------------------------------------------------------
# A composite makes no calls of its own: it is computed from the records of judges defined
# under ``judges`` (babelrun/composite.py), so it resumes, retries and pays like them.


class _Composite(_Spec, frozen=True):
    name: str
    # The judge its card is compared against (default: its first inner judge).
    base: str | None = None

    @property
    def kind(self) -> str:
        return str(self.__struct_config__.tag)


DualOrderRule = Literal["both", "label_both", "votes"]


class DualOrderSpec(_Composite, tag="dual_order", tag_field="kind", kw_only=True, frozen=True):
    """Ask ``of`` in both orders and combine them by a named ``rule`` (score/composite.py):
    ``both`` (a win needs both orders, else a tie; soft verdicts: the larger mean probability),
    ``label_both`` (the two verdicts must be equal; otherwise no decision: invalid) or
    ``votes`` (each order votes for the answer it names; ties and invalid replies abstain)."""

    of: str
    rule: DualOrderRule = "both"


class EnsembleSpec(_Composite, tag="ensemble", tag_field="kind", kw_only=True, frozen=True):
    """``of``'s judges vote on each presentation: ``majority`` of decisive verdicts (equal
    votes: tie), or ``soft``: the largest mean probability (every member soft)."""

    of: Annotated[list[str], msgspec.Meta(min_length=2)]
    vote: Literal["majority", "soft"] = "majority"


class CascadeSpec(_Composite, tag="cascade", tag_field="kind", kw_only=True, frozen=True):
    """``cheap`` first; ``strong`` decides where the cheap verdict is a tie or invalid, where
    its soft margin |P(A) − P(B)| is under ``margin`` (a soft cheap judge), or, with
    ``on_flip``, where its two orders disagree."""

    cheap: str
    strong: str
    margin: Probability | None = None
    on_flip: bool = True


class CalibratedSpec(_Composite, tag="calibrated", tag_field="kind", kw_only=True, frozen=True):
    """``of`` (a soft judge) with its slot-A bias removed: the mean log P(A)/P(B) over a
    held-out ``calibration_share`` of the items (never scored), per language when that
    language has ``min_items`` calibration items, else over all of them (a language's own
    estimate from few items is noisier than the pooled one is wrong)."""

    of: str
    calibration_share: Annotated[float, msgspec.Meta(gt=0.0, lt=1.0)] = 0.2
    min_items: PositiveInt = 50


class SampledSpec(_Composite, tag="sampled", tag_field="kind", kw_only=True, frozen=True):
    """``of``'s k samples of each presentation (its ``samples: k``) as one verdict: the
    majority (a strict plurality of reference, perturbed and tie; equal counts: tie); for a
    soft judge the largest mean probability (composites combine pairwise judges)."""

    of: str


CompositeSpec = DualOrderSpec | EnsembleSpec | CascadeSpec | CalibratedSpec | SampledSpec


def inner_judges(spec: CompositeSpec) -> list[str]:
    """The names of the judges a composite is computed from, in its own order."""
    if isinstance(spec, CascadeSpec):
        return [spec.cheap, spec.strong]
    return list(spec.of) if isinstance(spec, EnsembleSpec) else [spec.of]


# ---- the whole ----------------------------------------------------------------------------


class ScoringSpec(_Spec, frozen=True):
    bootstrap: Annotated[int, msgspec.Meta(ge=0, le=MAX_BOOTSTRAP)] = 1000
    confidence: Annotated[float, msgspec.Meta(gt=0.5, lt=1.0)] = 0.95


class LogSpec(_Spec, frozen=True):
    """Durability of the verdict log (see babelrun/log.py): ``interval`` fsyncs every
    ``fsync_interval_s`` and at rotation/exit; ``batch`` fsyncs every write."""

    fsync: Literal["interval", "batch"] = "interval"
    fsync_interval_s: Annotated[float, msgspec.Meta(gt=0, le=MAX_FSYNC_INTERVAL_S)] = 1.0
    segment_mb: Annotated[float, msgspec.Meta(gt=0, le=MAX_SEGMENT_MB)] = 16.0


class RaySpec(_Spec, frozen=True):
    """The Ray executor (``executor: ray``; see babelrun/cluster.py). The run directory must
    be on storage every worker can write (one machine, or a shared file system)."""

    address: str | None = None  # an existing cluster ("auto", "ray://head:10001"); unset: start one here
    workers: Annotated[int, msgspec.Meta(ge=1, le=MAX_WORKERS)] = 2  # shards of the plan, one Ray task each
    max_retries: Annotated[int, msgspec.Meta(ge=0, le=MAX_RETRIES)] = 3  # reschedules of a shard whose worker died
    num_cpus: Annotated[float, msgspec.Meta(ge=0, le=MAX_WORKERS)] = 1.0  # CPUs a worker reserves


class StoppingSpec(_Spec, frozen=True):
    """Anytime-valid early stopping per (judge, language) cell (``engine/stopping.py``,
    docs/stopping.md): a cell's calls stop once R's confidence sequence is entirely above or
    below ``threshold`` (``on: verdict``) or narrower than ``width`` (``on: width``), after
    ``min_items`` items taken in a seeded random order."""

    on: Literal["verdict", "width"] = "verdict"
    confidence: Annotated[float, msgspec.Meta(gt=0.5, lt=1.0)] = 0.95
    min_items: PositiveInt = 30
    width: Annotated[float, msgspec.Meta(gt=0.0, le=1.0)] | None = None
    threshold: Probability = 0.65  # the deployment R (score.verdict.DEPLOY_R)
    per_perturbation: bool = False  # cells per (judge, language, perturbation)


class CacheSpec(_Spec, frozen=True):
    """A response cache shared across runs (``store/cache.py``): key = judge id + the exact
    request; judges with temperature > 0 only when ``sampled`` is set (a cached sample is one
    sample)."""

    dir: str
    max_mb: Annotated[float, msgspec.Meta(gt=0, le=1 << 30)] = 1024.0  # finite: at most 1 PiB
    sampled: bool = False


class Manifest(_Spec, frozen=True):
    name: str
    judges: list[JudgeSpec]
    composites: list[CompositeSpec] = []
    corpus: CorpusSpec = CorpusSpec()
    # None (unset): every registered text perturbation at the default severities, filled in by
    # the manifest layer (``babelrun.manifest.text_perturbations``), which sees the registries.
    perturbations: list[PerturbationSpec] | None = None
    # Trajectory items (a ``trajectories`` corpus source); defaults apply when it is absent.
    agentic: AgenticSpec | None = None
    output_dir: str = "runs/{name}"
    seed: int = 0
    scoring: ScoringSpec = ScoringSpec()
    log: LogSpec = LogSpec()
    executor: Literal["local", "ray"] = "local"  # ray: the plan's shards run on Ray workers
    ray: RaySpec = RaySpec()
    stopping: StoppingSpec | None = None  # off by default
    cache: CacheSpec | None = None  # off by default

    @property
    def run_dir(self) -> Path:
        return Path(self.output_dir)



"""Gold-blind by construction (DESIGN.md, *Gold-blind*): no rule that turns replies into
verdicts or numbers may consult which answer is the reference.

A metamorphic suite. One world of items (two texts per item, shown in both slot orders) and
judges whose replies depend only on what stands in slot A and slot B (or on the one answer a
pointwise call sees). The *relabelled* world is the same items with the other text named the
reference: the same slot texts, the same replies, only the gold flipped. Every rule (the
reply readers, every composite, the text, labelled-pair and agentic cards, the pointwise
cards) must then mirror its verdicts and leave its symmetric metrics unchanged; judges that
ignore content (always ``A``, always the same probabilities, always the same score) must
land at chance or below on every card, composite and family.

The dual-order soft leak (an argmax over (P(reference), P(perturbed), P(tie)) breaking an
exact tie toward the reference) fails ``test_relabelling_mirrors_every_composite_verdict``
and ``test_content_blind_judges_are_at_chance_or_below`` on the old code.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa
import pytest

from babelrun.core.records import Record, verdict_of
from babelrun.judges import judge_spec
from babelrun.judges.base import JudgeReply
from babelrun.judges.protocol import Judging
from babelrun.score import composite, pointwise, score
from babelrun.score.verdict import CHANCE, DEPLOY_R
from babelrun.spec import CalibratedSpec, CascadeSpec, DualOrderSpec, EnsembleSpec
from babelrun.store import compact

LANGS = ("en", "ja")
# Families: degradation (plain and code-switched), a labelled-pair set, agent trajectories.
PERTURBATIONS = (("text", "sentence_drop"), ("text", "cs:sentence_drop"), ("labelled", "pairs:human"),
                 ("agentic", "agent:tool_name_swap"), ("agentic", "agent:argument_corrupt"),
                 ("agentic", "agent:hallucinated_tool"), ("agentic", "agent:step_pad"),
                 ("agentic", "agent:early_termination"))
ITEMS_PER_CELL = 40
ORDERS = ("ref_first", "pert_first")
FLIP = {"ref_first": "pert_first", "pert_first": "ref_first"}
MIRROR = {"reference": "perturbed", "perturbed": "reference", "tie": "tie", "invalid": "invalid"}
SOFT = judge_spec(name="soft", backend="simulated", soft=True)
HARD = judge_spec(name="hard", backend="simulated")


def _u(*parts: object) -> float:
    """A uniform number in [0, 1) from its arguments (stable, no global RNG)."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest) / 2**64


# ---- the judges: functions of the slot texts only ---------------------------------------


def _reply_random_hard(item, a, b):
    u = _u("hard", item, a, b)
    return JudgeReply(raw=("A", "B", "tie", "nonsense")[int(u * 4)])


def _reply_random_soft(item, a, b):
    p = np.array([_u("soft", item, a, b, k) for k in range(3)]) + 0.05
    if _u("exact", item, a, b) < 0.2:  # exact ties between the slots, as a coarse model gives
        p[1] = p[0]
    p = p / p.sum()
    return JudgeReply(raw="", probs=(float(p[0]), float(p[1]), float(p[2])))


def _reply_longer(item, a, b):
    """Content-aware: the longer text (a real, gold-independent preference)."""
    return JudgeReply(raw="A" if len(a) > len(b) else "B")


def _reply_always_a(item, a, b):
    return JudgeReply(raw="A")


def _reply_fixed_soft(item, a, b):
    return JudgeReply(raw="", probs=(0.75, 0.20, 0.05))


def _reply_even_soft(item, a, b):
    return JudgeReply(raw="", probs=(0.45, 0.45, 0.10))


PAIRWISE = {  # name: (reply, reads as)
    "random_hard": (_reply_random_hard, HARD), "random_soft": (_reply_random_soft, SOFT),
    "longer": (_reply_longer, HARD), "always_a": (_reply_always_a, HARD),
    "fixed_soft": (_reply_fixed_soft, SOFT), "even_soft": (_reply_even_soft, SOFT),
    "random_soft2": (lambda i, a, b: _reply_random_soft(f"2{i}", a, b), SOFT),
    "random_soft3": (lambda i, a, b: _reply_random_soft(f"3{i}", a, b), SOFT),
}
BLIND = ("always_a", "fixed_soft", "even_soft")
POINTWISE = {"scores": lambda item, text: float(1 + int(_u("pw", text) * 10)),
             "constant": lambda item, text: 7.0}

TWO_ORDER_RULES = ("label_both", "votes")  # beside the default, both
COMPOSITES = [
    *[DualOrderSpec(name=f"dual({j})", of=j) for j in PAIRWISE],
    *[DualOrderSpec(name=f"{rule}({j})", of=j, rule=rule) for rule in TWO_ORDER_RULES for j in PAIRWISE],
    *[CalibratedSpec(name=f"cal({j})", of=j, min_items=5) for j in PAIRWISE if PAIRWISE[j][1].soft],
    EnsembleSpec(name="maj", of=["random_hard", "longer", "always_a"]),
    EnsembleSpec(name="soft_vote", of=["random_soft", "random_soft2", "random_soft3"], vote="soft"),
    EnsembleSpec(name="blind_vote", of=["fixed_soft", "even_soft", "fixed_soft"], vote="soft"),
    EnsembleSpec(name="blind_maj", of=["always_a", "always_a", "always_a"]),
    CascadeSpec(name="cascade", cheap="random_soft", strong="random_hard", margin=0.3),
    CascadeSpec(name="cascade_blind", cheap="fixed_soft", strong="always_a", margin=0.6),
    CascadeSpec(name="cascade_even", cheap="even_soft", strong="fixed_soft", margin=0.1, on_flip=False),
]
IDS = {name: f"j{i}" for i, name in enumerate([*PAIRWISE, *POINTWISE])}


def _world(relabelled: bool) -> pa.Table:
    """Every judge's records. Item k's texts are X and Y (their lengths differ item by
    item); the reference is X, or Y when ``relabelled``."""
    readers = {name: Judging.of(spec) for name, (_, spec) in PAIRWISE.items()}
    records = []
    for lang in LANGS:
        for kind, pert in PERTURBATIONS:
            for k in range(ITEMS_PER_CELL):
                item = f"{lang}-{pert}-{k}"
                x = "x" * (20 + int(_u("lx", item) * 40))
                y = "y" * (20 + int(_u("ly", item) * 40))
                ref, pert_text = (y, x) if relabelled else (x, y)
                common = dict(item_id=item, status="ok", kind=kind, lang=lang, perturbation=pert,
                              severity=0.5, ref_len=len(ref), pert_len=len(pert_text), ref_id=f"r{k % 13}")
                for name, (reply_of, _) in PAIRWISE.items():
                    for order in ORDERS:
                        a, b = (ref, pert_text) if order == "ref_first" else (pert_text, ref)
                        reply = reply_of(item, a, b)
                        slot, _ = readers[name].read(reply)
                        probs = tuple(round(p, 6) for p in reply.probs) if reply.probs else (None, None, None)
                        records.append(Record(judge_id=IDS[name], judge=name, order=order,
                                              verdict=verdict_of(slot, order), slot=slot,
                                              p_a=probs[0], p_b=probs[1], p_tie=probs[2], **common))
                if kind != "text":
                    continue
                for name, score_of in POINTWISE.items():
                    for answer, text in (("reference", ref), ("degraded", pert_text)):
                        records.append(Record(judge_id=IDS[name], judge=name, order=answer, verdict=None,
                                              score=score_of(item, text), **common))
    return compact.FirstOk()(compact.table(records))


def _pairwise(data: pa.Table) -> pa.Table:
    return pointwise.pairwise_only(data)


@pytest.fixture(scope="module")
def worlds():
    return _world(False), _world(True)


def _by_presentation(data: pa.Table, derived: composite.Derived, relabelled: bool) -> dict:
    """verdict by (item, what stands in slot A): ``order`` names it in the original world,
    its flip in the relabelled one (the same slot texts)."""
    items = data["item_id"].to_pylist()
    orders = data["order"].cast(pa.string()).to_pylist()
    names = np.array(["reference", "perturbed", "tie", "invalid"], dtype=object)[derived.verdict]
    out = {}
    for row, verdict in zip(derived.rows, names, strict=True):
        order = FLIP[orders[row]] if relabelled else orders[row]
        out[(items[row], order)] = MIRROR[verdict] if relabelled else verdict
    return out


def test_the_readers_name_slots_from_the_reply_alone():
    """The reply readers see a reply, never an order or the gold: the soft reader's exact
    A = B tie goes to slot A (a position bias, the same in both worlds), never the reference."""
    soft = Judging.of(SOFT)
    assert soft.read(JudgeReply(raw="", probs=(0.45, 0.45, 0.1)))[0] == "A"
    assert soft.read(JudgeReply(raw="B", probs=None))[0] == "invalid"  # a soft judge reads probabilities only
    assert Judging.of(HARD).read(JudgeReply(raw="tie"))[0] == "tie"


def test_relabelling_mirrors_every_composite_verdict(worlds):
    original, relabelled = (_pairwise(w) for w in worlds)
    a = {d.spec.name: d for d in composite.derive(original, COMPOSITES, IDS)}
    b = {d.spec.name: d for d in composite.derive(relabelled, COMPOSITES, IDS)}
    for spec in COMPOSITES:
        got_a = _by_presentation(original, a[spec.name], False)
        got_b = _by_presentation(relabelled, b[spec.name], True)
        assert got_a.keys() == got_b.keys(), spec.name
        wrong = [k for k in got_a if got_a[k] != got_b[k]]
        assert not wrong, f"{spec.name}: {len(wrong)} verdicts do not mirror, e.g. {wrong[0]}: " \
                          f"{got_a[wrong[0]]} vs mirrored {got_b[wrong[0]]}"


def _scored(data: pa.Table):
    pairwise = _pairwise(data)
    derived = composite.derive(pairwise, COMPOSITES, IDS)
    return score(pa.concat_tables([pairwise, *[composite.table(pairwise, d) for d in derived]]), [], replicates=0)


def _cards(cards) -> dict:
    """Every text-shaped card by (family, judge, language, perturbation)."""
    out = {}
    families = [("degradation", cards.judges), *[(f.family, f.judges) for f in cards.pairs]]
    for family, judges in families:
        for jc in judges:
            out[(family, jc.judge, "all", "")] = jc.overall
            for lc in jc.languages:
                out[(family, jc.judge, lc.lang, "")] = lc.card
                for pc_ in lc.perturbations:
                    out[(family, jc.judge, lc.lang, pc_.perturbation)] = pc_.card
    return out


SYMMETRIC = ("position_bias", "order_consistency", "verdict_consistency", "verbosity", "tie_rate", "invalid_rate")


def _v(interval):
    return interval.value


def test_relabelling_leaves_symmetric_metrics_and_mirrors_accuracy(worlds):
    a, b = (_scored(w) for w in worlds)
    ca, cb = _cards(a), _cards(b)
    assert ca.keys() == cb.keys() and len(ca) > 100
    for key, card in ca.items():
        other = cb[key]
        for metric in SYMMETRIC:
            x, y = _v(getattr(card, metric)), _v(getattr(other, metric))
            assert (x is None) == (y is None) and (x is None or abs(x - y) < 2e-4), (key, metric, x, y)
        # accuracy mirrors: what was the reference's share is now the perturbed one's
        wrong = 1 - _v(card.accuracy) - _v(card.tie_rate) - _v(card.invalid_rate)
        assert _v(other.accuracy) == pytest.approx(wrong, abs=4e-4), key
    # the agentic cards: position bias, order consistency and the length bias unchanged
    for ja, jb in zip(a.agentic, b.agentic, strict=True):
        for la, lb in zip([ja.overall, *[c.card for c in ja.languages]], [jb.overall, *[c.card for c in jb.languages]],
                          strict=True):
            for metric in ("position_bias", "order_consistency", "length_bias"):
                x, y = getattr(la, metric), getattr(lb, metric)
                assert (x is None) == (y is None)
                if x is not None:
                    assert (x.value is None) == (y.value is None)
                    assert x.value is None or abs(x.value - y.value) < 2e-4, (ja.judge, metric)


def test_relabelling_mirrors_pointwise_cards(worlds):
    a, b = (pointwise.cards(w.filter(pointwise.is_pointwise(w)), replicates=0) for w in worlds)
    assert [c.judge for c in a] == ["constant", "scores"]
    for ja, jb in zip(a, b, strict=True):
        for x, y in [(ja.overall, jb.overall), *[(p.card, q.card) for p, q in zip(ja.languages, jb.languages,
                                                                                      strict=True)]]:
            assert x.tie_rate.value == pytest.approx(y.tie_rate.value, abs=2e-4)
            assert (x.verbosity.value is None) == (y.verbosity.value is None)
            if x.verbosity.value is not None:
                assert x.verbosity.value == pytest.approx(y.verbosity.value, abs=2e-4)
            assert y.discrimination.value == pytest.approx(1 - x.discrimination.value - x.tie_rate.value, abs=4e-4)
            assert y.margin.value == pytest.approx(-x.margin.value, abs=2e-4)


def _at_or_below_chance(card, r: str = "reliability") -> None:
    acc, rel = card.accuracy.value, getattr(card, r).value
    assert acc is None or acc <= CHANCE + 1e-9
    assert rel is None or rel <= CHANCE
    assert card.verdict != "pass"


@pytest.mark.parametrize("relabelled", [False, True])
def test_content_blind_judges_are_at_chance_or_below(worlds, relabelled):
    """Always A, always (A 0.75, B 0.20, tie 0.05), always an exact A = B tie, and every
    composite built only from them: at or below chance on every card (all families,
    languages and perturbations), R and accuracy."""
    cards = _scored(worlds[relabelled])
    blind = set(BLIND) | {f"{rule}({j})" for rule in ("dual", *TWO_ORDER_RULES) for j in BLIND} \
        | {f"cal({j})" for j in BLIND if PAIRWISE[j][1].soft} \
        | {"blind_vote", "blind_maj", "cascade_blind", "cascade_even"}
    seen = set()
    for (_family, judge, _lang, _pert), card in _cards(cards).items():
        if judge in blind:
            seen.add(judge)
            _at_or_below_chance(card)
    assert seen == blind
    agentic = [j for j in cards.agentic if j.judge in blind]
    assert {j.judge for j in agentic} == blind
    for jc in agentic:
        for card in [jc.overall, *[c.card for c in jc.languages]]:
            _at_or_below_chance(card)


def test_the_always_a_soft_judge_and_its_dual_order(worlds):
    """The issue's numbers: as itself R ≈ 0.06-ish (Δ = 1); its dual-order mitigation used to
    read R = 1.00, accuracy 1.00 (every exact tie given to the reference). Now every
    decision is a tie: accuracy 0 and R 0, below chance."""
    cards = _scored(worlds[0])
    by = {jc.judge: jc.overall for jc in cards.judges}
    own, dual = by["fixed_soft"], by["dual(fixed_soft)"]
    assert own.accuracy.value == pytest.approx(0.5) and own.position_bias.value == pytest.approx(1.0)
    assert own.reliability.value < 0.1
    assert dual.accuracy.value == 0.0 and dual.tie_rate.value == 1.0 and dual.reliability.value == 0.0


def test_a_constant_pointwise_score_is_never_rewarded(worlds):
    """R_pw's undefined-v case: a judge that gives every answer the same score
    (discrimination 0, stability 1) is unmeasured on length, not excused: R_pw 0, not 0.4."""
    (constant, scores) = pointwise.cards(worlds[0].filter(pointwise.is_pointwise(worlds[0])), replicates=50)
    card = constant.overall
    assert card.discrimination.value == 0.0 and card.stability.value == 1.0 and card.verbosity.value is None
    assert card.reliability.value == 0.0
    assert all(lc.card.reliability.value == 0.0 for lc in constant.languages)
    assert scores.overall.reliability.value is not None and scores.overall.reliability.value < DEPLOY_R


def test_the_two_order_rules_decide_as_documented():
    """Every (first, second) verdict pair under each rule, and its mirror: swapping reference and
    perturbed in both inputs swaps the output, so no rule can lean toward the gold."""
    ref, pert, tie, invalid = range(4)
    cases = {  # (first, second): (both, label_both, votes)
        (ref, ref): (ref, ref, ref), (ref, pert): (tie, invalid, tie), (ref, tie): (tie, invalid, ref),
        (ref, invalid): (ref, invalid, ref), (tie, tie): (tie, tie, tie), (tie, invalid): (tie, invalid, tie),
        (invalid, invalid): (invalid, invalid, invalid),
    }
    mirror = np.array([pert, ref, tie, invalid])
    for (x, y), want in list(cases.items()):
        cases[(int(mirror[x]), int(mirror[y]))] = tuple(int(mirror[w]) for w in want)
        cases.setdefault((y, x), want)
    first, second = (np.array([k[i] for k in cases]) for i in (0, 1))
    for r, rule in enumerate(("both", "label_both", "votes")):
        got = composite.TWO_ORDER_RULES[rule](first, second)
        assert got.tolist() == [w[r] for w in cases.values()], rule
        assert (composite.TWO_ORDER_RULES[rule](mirror[first], mirror[second]) == mirror[got]).all(), rule


def _sampled_table(relabel: bool, soft: bool, k: int = 4) -> pa.Table:
    """One judge's k samples of 200 items in both orders; replies a function of the slot
    texts and the sample index only (many exact ties among an even number of samples). The
    relabelled world names the other text the reference: orders flip, verdicts mirror."""
    rows: dict[str, list] = {n: [] for n in ("judge_id", "item_key", "order", "verdict", "p_a", "p_b", "p_tie",
                                             "sample")}
    for item in range(200):
        for order in ORDERS:
            slots = ("x", "y") if order == "ref_first" else ("y", "x")  # x: the reference of the first world
            for s in range(k):
                u = _u("sampled", item, *slots, s)
                slot = ("A", "B", "tie", "invalid")[int(u * 4)] if not soft else None
                p_a = round(_u("pa", item, *slots, s), 1)  # coarse: exact ties of mean probabilities
                probs = (p_a, round(1 - p_a, 6), 0.0) if soft else (None, None, None)
                shown = FLIP[order] if relabel else order
                verdict = verdict_of(slot, shown) if slot else "invalid"
                rows["judge_id"].append("j")
                rows["item_key"].append(item)
                rows["order"].append(shown)
                rows["verdict"].append(verdict)
                rows["p_a"].append(probs[0])
                rows["p_b"].append(probs[1])
                rows["p_tie"].append(probs[2])
                rows["sample"].append(s)
    return pa.table({**rows, "item_key": pa.array(rows["item_key"], pa.uint64()), "lang": ["en"] * len(rows["order"])})


@pytest.mark.parametrize("soft", [False, True])
def test_the_sampled_composite_mirrors_and_breaks_no_tie_toward_the_gold(soft):
    from babelrun.spec import SampledSpec

    spec = SampledSpec(name="maj", of="j")
    got = {}
    for relabel in (False, True):
        data = _sampled_table(relabel, soft)
        (derived,) = composite.derive(data, [spec], {"j": "j"})
        order = data["order"].to_numpy(zero_copy_only=False)[derived.rows]
        item = data["item_key"].to_numpy()[derived.rows]
        names = np.array(composite.metrics.VERDICTS, dtype=object)[derived.verdict]
        got[relabel] = {(int(i), FLIP[o] if relabel else o): MIRROR[v] if relabel else v
                        for i, o, v in zip(item, order, names, strict=True)}
        assert derived.calls_per_decision == 4
    assert len(got[False]) == 400 and got[False] == got[True]
    ties = sum(v == "tie" for v in got[False].values())
    assert ties > 20  # exact ties happen, and are ties
    wins = [v for v in got[False].values() if v in ("reference", "perturbed")]
    assert abs(wins.count("reference") - len(wins) / 2) < len(wins) * 0.15  # content-blind: near chance

"""The engine's hot path gives what the plain definitions give: a plan's items
replayed from its survey are the items ``generate`` makes, and a render through the
precomputed template is the render of ``str.format_map`` over every field and alias."""

from __future__ import annotations

import msgspec
import pytest

from babelrun import corpus
from babelrun.core import languages
from babelrun.core.items import Item, generate
from babelrun.judges import judge_spec
from babelrun.judges.base import JudgeRequest
from babelrun.judges.prompt import TEMPLATES
from babelrun.judges.protocol import ALIASES, Judging
from babelrun.manifest import Manifest
from babelrun.perturb import TEXT_PERTURBATIONS, perturb_reference
from babelrun.plan import Plan
from babelrun.spec import JudgeSpec

ALL = [(name, [0.1, 0.2, 0.3, 0.5, 0.6, 0.9]) for name in TEXT_PERTURBATIONS]


def _references():
    refs = corpus.select(Manifest(name="t", judges=[])).references
    return sorted(refs, key=lambda r: (r.lang, r.ref_id))


def test_replayed_items_are_the_generated_ones():
    refs = _references()
    plan = Plan(refs, ALL, seed=3)
    generated = [it for _, it, _ in generate(refs, ALL, 3, perturb_reference) if it is not None]
    outcomes = {o for _, _, o in generate(refs, ALL, 3, perturb_reference)}
    assert outcomes == {"emitted", "no-op", "merged"}  # the replay skips both kinds of non-item
    assert list(plan.items()) == generated
    assert list(plan.items()) == generated  # every pass, not only the first
    assert [it.item_id for it in generated] == plan.item_ids


def test_a_shard_replays_the_same_items():
    from babelrun.core.keys import Shard

    plan = Plan(_references()[:40], ALL, seed=0)
    shard = plan.sharded(Shard(1, 3))
    assert list(shard.items()) == list(plan.items())
    every = {(it.item_id, k) for it, k, _ in plan.pending("j", ("ref_first", "pert_first"))}
    parts = set()
    for i in range(3):
        parts |= {(it.item_id, k) for it, k, _ in plan.sharded(Shard(i, 3)).pending("j", ("ref_first", "pert_first"))}
    assert parts == every


def _plain_render(protocol: Judging, item: Item, key: str) -> list[dict[str, str]]:
    """The render as it was before the precomputation: every field, every alias."""
    values = {"question": item.prompt}
    if "reference" in protocol.fields:
        values["reference"] = item.reference_answer
    if "language" in protocol.fields:
        values["language"] = languages.name(item.lang)
    if protocol.kind == "pointwise":
        values["answer"] = item.reference if key == "reference" else item.perturbed
    else:
        request = JudgeRequest(item, key, [])
        values["answer_a"], values["answer_b"] = request.answer_a, request.answer_b
    values.update({alias: values[name] for alias, name in ALIASES.items() if name in values})
    system, user = protocol.template.texts(item.lang if protocol.localized else None)
    messages = [{"role": "system", "content": system.format_map(values)}] if system else []
    messages.append({"role": "user", "content": user.format_map(values)})
    return messages


def _spec(**fields) -> JudgeSpec:
    return judge_spec(**{"name": "j", "backend": "openai", "model": "m", **fields})


SPECS = [
    *({"prompt": name, "protocol": "pointwise" if name.startswith("pointwise") else "pairwise"} for name in TEMPLATES),
    *({"prompt": name, "prompt_language": "item",
       "protocol": "pointwise" if name.startswith("pointwise") else "pairwise"} for name in TEMPLATES),
    {"prompt": {"system": "Judge {{fairly}}.", "user": "{instruction}\n{output_1}|{output_2} {prompt} {answer_a}"},
     "verdict": {"pattern": r"\b(A|B)\b"}},
    {"prompt": {"system": "In {language}: {question}", "user": "{answer_a} {answer_b} {reference} {criterion}"},
     "verdict": {"pattern": r"\b(A|B)\b"}},
    {"prompt": {"user": "{question}: {output} ({ref_answer_1}) {{[[x]]}}"}, "protocol": "pointwise"},
]


@pytest.mark.parametrize("fields", SPECS, ids=lambda f: str(f.get("prompt"))[:40] + str(f.get("prompt_language", "")))
def test_render_is_format_map_over_every_field(fields):
    protocol = Judging.of(_spec(**fields))
    refs = _references()
    plan = Plan(refs, [("truncate", [0.5]), ("repeat_pad", [0.3])], seed=0)
    items = [msgspec.structs.replace(it, reference_answer=f"guide {it.ref_id}") for it in plan.items()]
    langs = {it.lang for it in items}
    assert len(langs) > 5
    for item in items:
        for key in protocol.keys:
            assert protocol.render(item, key) == _plain_render(protocol, item, key)
            assert protocol.request(item, key).messages == _plain_render(protocol, item, key)


def test_an_account_is_open_exactly_when_admit_would_not_wait():
    """``open_now(estimate)`` is what lets an admission skip the drain's cancel scope: it must
    be True only when ``admit(estimate)`` returns without awaiting anything."""
    import anyio

    from babelrun.engine.limits import Account

    async def check() -> None:
        account = Account(("u", "k"), rpm=600, tpm=60_000)  # 2 requests deep, 1,000 tokens deep
        assert account.open_now(500)
        assert account.open_now(5_000)  # admit reserves at most the bucket's depth: no wait either
        await account.admit(500)
        await account.admit(400)
        assert not account.open_now(0)  # the request bucket (2 deep) is full
        assert Account(("u", "k"), rpm=None, tpm=None).open_now(10**9)
        tokens_only = Account(("u", "k"), rpm=None, tpm=60_000)
        await tokens_only.admit(900)
        assert tokens_only.open_now(50) and not tokens_only.open_now(500)
        paused = Account(("u", "k"), rpm=None, tpm=None)
        paused.pause(30)
        assert not paused.open_now()

    anyio.run(check)


def test_a_drain_ends_an_admission_waiting_on_the_request_bucket():
    """An admission that must wait (the bucket is full) still waits in a scope the drain
    cancels: the call ends without a record (``_Drained``), and nothing is sent."""
    import anyio

    from babelrun.engine import limits
    from babelrun.engine.pipeline import JudgeRunner, _Drained
    from babelrun.engine.state import JudgeState

    sent = []

    class Judge:
        spec = _spec()

        async def judge(self, request):
            sent.append(request)
            raise AssertionError("not to be sent")

    async def check() -> None:
        account = limits.Account(("u", "k"), rpm=60, tpm=None)
        await account.admit(0)
        await account.admit(0)  # 2 deep: the next waits ~1 s
        runner = JudgeRunner(Judge(), account, limits.FixedConcurrency(), JudgeState("j", "jid", 1, 0))
        item = next(iter(Plan(_references()[:1], [("truncate", [0.5])], seed=0).items()))
        outcome = []

        async def call() -> None:
            try:
                await runner.call(JudgeRequest(item, "ref_first", []))
            except _Drained:
                outcome.append("drained")

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await anyio.sleep(0.05)
                assert not account.open_now()
                runner.drain()
        assert outcome == ["drained"] and not sent

    anyio.run(check)


def test_gazetteer_names_are_langcodes_names():
    """``script._place_and_language_names`` picks each territory's and language's name in the
    target language as langcodes' ``territory_name`` / ``language_name`` do (the closest match
    worked out once per candidate set): the same names for languages, regions, scripts and
    codes without data."""
    import langcodes
    from langcodes.data_dicts import TERRITORY_REPLACEMENTS
    from language_data.language_lists import CLDR_LANGUAGES

    from babelrun.perturb import script

    def langcodes_names(lang: str) -> set[str]:
        names = set()
        for code in {t for t in TERRITORY_REPLACEMENTS.values() if len(t) == 2 and t.isalpha()}:
            names.add(langcodes.Language.make(territory=code).territory_name(lang))
        for code in CLDR_LANGUAGES:
            names.add(langcodes.Language.get(code).language_name(lang))
        return {n for n in names if len(n) >= 2 and "[" not in n}

    for lang in ("en", "de", "fr", "sw", "yo", "bn", "ja", "zh-Hant", "sr-Latn", "pt-BR", "iw", "tlh", "xx"):
        fast = script._place_and_language_names(lang)
        assert set(fast) == langcodes_names(lang), lang
        assert len(fast) == len(set(fast)) and [len(n) for n in fast] == sorted(map(len, fast), reverse=True)


@pytest.mark.parametrize("hold", ["none", "whole", "packed", "made past it"])
def test_kept_items_replay_the_generated_ones(monkeypatch, hold):
    """The survey keeps its items whole when their texts fit in ``HOLD_BYTES`` (expected before
    the survey, and counted as made), else their texts packed; every pass then yields the
    same items as ``generate``'s, in the same order, without perturbing. After ``release``,
    or past the bound, a pass perturbs every item again, to the same items. The segmentation
    counted during the survey is the one of a pass of its own."""
    import babelrun.plan as plan_module
    from babelrun.plan import segmentation

    refs = _references()
    monkeypatch.setattr(Plan, "HOLD_BYTES", {"none": 0, "made past it": 40_000}.get(hold, 1 << 30))
    if hold == "packed":  # the texts would not fit whole: packed
        monkeypatch.setattr(Plan, "_expected_bytes", lambda self: 1 << 31)
    if hold == "made past it":  # the estimate says they fit, the items made say otherwise
        monkeypatch.setattr(Plan, "_expected_bytes", lambda self: 0)
    plan = Plan(refs, ALL, seed=3)
    assert sum(len(h) for h in plan._held) == (plan.n_items if hold == "whole" else 0)
    assert (plan._packed[0] is not None) == (hold == "packed")  # the text items' (no code-switched here)
    calls = []

    def counting(ref, name, severity, rng):
        calls.append(1)
        return perturb_reference(ref, name, severity, rng)

    monkeypatch.setattr(plan_module, "perturb_reference", counting)
    generated = [it for _, it, _ in generate(refs, ALL, 3, perturb_reference) if it is not None]
    assert list(plan.items()) == generated
    assert list(plan.sharded(None).items()) == generated
    assert len(calls) == (0 if hold in ("whole", "packed") else 2 * len(generated))
    plan.release()
    assert list(plan.items()) == generated
    assert sum(len(h) for h in plan._held) == 0 and all(p is None for p in plan._packed)
    assert plan.segmentation == segmentation(refs)


def test_packed_texts_give_back_every_text_as_it_was():
    """Texts no corpus should hold, and a reference past zlib's 32 KB window: each comes
    back equal, in order, across references sharing nothing."""
    from babelrun.core.items import PackedTexts

    long = "Lorem ipsum dolor sit amet. " * 3000
    sources = [("ref one. two.", ["ref one.", "", "two. \x00 ref", "\ud800 lone", "😀 astral 中文"]),
               (long, [long[:50_000], long[:-7], "x" * 40_000]), ("", ["a"]), ("same", ["same!"])]
    packed = PackedTexts()
    expected = []
    for source, texts in sources:
        for text in texts:
            packed.add(Item("i", "text", "en", "r", "q", source, text, "truncate", 0.5, len(source), len(text)))
            expected.append(text)
    packed.close()
    assert list(packed) == expected and list(packed) == expected
    assert packed.nbytes < sum(len(t) for t in expected) / 5


_FROM_THE_REPLY = {"status", "verdict", "slot", "score", "p_a", "p_b", "p_tie", "raw", "latency_ms", "attempts",
                   "tokens_in", "tokens_out", "served_model", "fingerprint", "tokens_cached", "truncated",
                   "tokens_cache_write", "ts", "error_kind", "error", "cached"}


@pytest.mark.parametrize("protocol", ["pairwise", "pointwise"])
def test_an_ok_record_carries_what_every_record_takes_from_its_item(protocol):
    """``ok_record`` names every field itself (the call path's one construction); what it
    takes from the item and the judge is what ``record`` (every other record) takes."""
    from babelrun import judges
    from babelrun.engine import records as build
    from babelrun.judges import JudgeReply
    from babelrun.plan import probes as probe_items
    from babelrun.spec import PerturbationSpec

    spec = judges.judge_spec(**{"name": "j", "backend": "openai", "model": "m", "endpoint": "http://127.0.0.1:9/v1",
                                "protocol": protocol, **({"prompt": "pointwise"} if protocol == "pointwise" else {})})
    judge = judges.build(spec, 0)
    refs = _references()[:6]
    items = list(Plan(refs, [("truncate", [0.5])], seed=1).items())
    items += [it for _, it, _ in probe_items.generate(refs, [PerturbationSpec(name="authority")], 1) if it]
    assert any(it.cue for it in items) and any(not it.cue for it in items)
    reply = JudgeReply(raw="A" if protocol == "pairwise" else "7", served_model="x", fingerprint=None,
                       tokens_in=12, tokens_out=1)
    for item in items:
        for key in judge.protocol.keys:
            ok = build.ok_record(judge, judge.protocol.request(item, key), reply, 1, 0.01)
            plain = build.record(judge, item, key, status="ok")
            for field in msgspec.structs.fields(ok):
                if field.name not in _FROM_THE_REPLY:
                    assert getattr(ok, field.name) == getattr(plain, field.name), field.name


def test_a_verdict_rule_remembers_its_readings_of_short_replies_only(monkeypatch):
    """A declared pattern's reader searches a short reply once, a long one every time, and
    remembers no search that timed out; every reading is the one a fresh search gives."""
    from babelrun.judges import protocol, safe_regex
    from babelrun.spec import VerdictSpec

    searched = []
    real = safe_regex.search

    def counting(pattern, text, match="first"):
        searched.append(text)
        if text == "slow [[A]]":
            raise safe_regex.PatternTimeout(pattern.pattern)
        return real(pattern, text, match)

    monkeypatch.setattr(safe_regex, "search", counting)
    read = protocol.slot_reader(VerdictSpec(pattern=r"\[\[(A|B|C)\]\]", labels={"A": "A", "B": "B", "C": "tie"}))
    long = "Answer B misses the point; " * 10 + "[[A]]"
    assert [read("[[A]]"), read("[[A]]"), read("[[C]]"), read(long), read(long), read("none")] == \
           ["A", "A", "tie", "A", "A", "invalid"]
    assert searched == ["[[A]]", "[[C]]", long, long, "none"]
    for _ in range(2):
        with pytest.raises(safe_regex.PatternTimeout):
            read("slow [[A]]")
    assert searched[-2:] == ["slow [[A]]"] * 2
    score = protocol.score_reader(VerdictSpec(pattern=r"Rating: (\d+)", scale=(1, 10)))
    assert [score("Rating: 7"), score("Rating: 7"), score("Rating: 11")] == [7.0, 7.0, None]
    assert searched[-2:] == ["Rating: 7", "Rating: 11"]

"""Pointwise judges through the commands: a pointwise-only run and a mixed run put
their pointwise judges in the judge × language matrix, the leaderboard, the recommendations,
``score``'s count, ``export`` and ``Cards.to_pandas``; ``pin`` keeps their scores as canaries
and ``check`` exits 0 unchanged, 1 after a silent change of scores. And a judge whose every
reply misses its verdict pattern is diagnosed, not judged (exit 3)."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

import babelrun
from babelrun.app import lockfile
from babelrun.app.cli import main
from babelrun.score import decode
from babelrun.score.diagnose import EXIT_MISCONFIGURED
from helpers import LoopbackServer, simulated, write_manifest

SHIFT = 0.0  # a silent change of the user's judge: its code, not its identity
CORPUS = {"sources": [{"kind": "bundled"}], "languages": ["en", "es", "sw"], "references_per_language": 6}


def score_answer(request) -> dict:
    """A pointwise judge that is code: the longer answer scores higher (truncation shortens)."""
    text = request.item.reference if request.order == "reference" else request.item.perturbed
    return {"score": min(10.0, 1.0 + len(text) // 40) + SHIFT}


POINTWISE = {"name": "scorer", "backend": "python", "callable": f"{__name__}:score_answer", "protocol": "pointwise",
             "prompt": "pointwise",
             "verdict": {"pattern": r"(\d+)", "scale": [1, 20]}}
NOISY = {**simulated("noisy-pw", score_noise=3.0, score_drop=0.5), "protocol": "pointwise", "prompt": "pointwise"}


def _audit(tmp_path, judges) -> tuple[int, object]:
    path = write_manifest(tmp_path, judges, corpus=CORPUS, scoring={"bootstrap": 50},
                          perturbations=[{"name": "truncate", "severities": [0.5]},
                                         {"name": "repeat_pad", "severities": [0.5]}])
    return main(["audit", str(path)]), tmp_path / "run"


def _report(run_dir) -> str:
    return (run_dir / "report.md").read_text()


def _section(text: str, title: str) -> str:
    return text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


@pytest.fixture(scope="module")
def only(tmp_path_factory):
    code, run = _audit(tmp_path_factory.mktemp("pw-only"), [POINTWISE])
    assert code == 0
    return run


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    code, run = _audit(tmp_path_factory.mktemp("pw-mixed"), [simulated("pair", default_accuracy=0.9), NOISY])
    assert code == 0
    return run


def test_a_pointwise_only_run_is_in_matrix_leaderboard_score_export_and_pandas(only, tmp_path, capsys):
    report = _report(only)
    assert "No judge has counted records yet" not in report
    matrix, board = _section(report, "Judge × language"), _section(report, "Leaderboard")
    assert "scorer · pointwise" in matrix and "| en |" in matrix
    assert "| pointwise | scorer |" in board
    capsys.readouterr()
    assert main(["score", str(only)]) == 0
    assert "cards for 1 judge(s)" in capsys.readouterr().out
    assert main(["export", str(only), "--out", str(tmp_path)]) == 0
    cards = pq.read_table(tmp_path / "cards.parquet").to_pandas()
    pw = cards[cards.family == "pointwise"]
    assert set(pw.judge) == {"scorer"} and {"reliability", "discrimination", "stability"} <= set(pw.metric)
    df = decode((only / "cards.json").read_bytes()).to_pandas()
    assert len(df[(df.family == "pointwise") & (df.lang == "all") & (df.perturbation == "all")
                  & (df.metric == "reliability")]) == 1


def test_a_mixed_run_ranks_and_advises_pointwise_judges(mixed):
    report = _report(mixed)
    matrix, board, advice = (_section(report, t) for t in ("Judge × language", "Leaderboard", "Recommendations"))
    assert "| pair |" in matrix.replace(" · pointwise", "") and "noisy-pw · pointwise" in matrix
    assert "| degradation | pair |" in board and "| pointwise | noisy-pw |" in board
    assert "noisy-pw" in advice  # R_pw under the bar: route it elsewhere
    cards = decode((mixed / "cards.json").read_bytes())
    assert cards.pointwise[0].overall.verdict == "fail"


def test_pin_keeps_pointwise_scores_and_check_sees_a_silent_change(only, tmp_path, capsys, monkeypatch):
    lock = tmp_path / "lock.json"
    assert main(["pin", str(only), "--out", str(lock)]) == 0
    locked = lockfile.read(lock).judges[0]
    assert locked.canary and all(set(c.scores) == {"reference", "degraded"} for c in locked.canary)
    assert all(isinstance(v, float) for c in locked.canary for v in c.scores.values())
    manifest = only.parent / "manifest.yaml"
    assert main(["check", str(lock), "--manifest", str(manifest)]) == 0
    monkeypatch.setitem(globals(), "SHIFT", 1.0)
    assert main(["check", str(lock), "--manifest", str(manifest)]) == 1
    last = lockfile.read(lock).checks[-1]
    assert last.drift and last.verdict_flips == last.answered == last.asked


def test_a_judge_whose_replies_all_miss_the_pattern_is_diagnosed_not_judged(tmp_path, capsys):
    broken = {**simulated("broken", invalid_rate=1.0), "verdict": {"pattern": r"\[\[([ABC])\]\]",
                                                                    "labels": {"A": "A", "B": "B", "C": "tie"}}}
    code, run = _audit(tmp_path, [simulated("fine", default_accuracy=0.9), broken])
    assert code == EXIT_MISCONFIGURED == 3
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if x.startswith("misconfigured: broken"))
    assert "100% of replies did not match the verdict pattern" in line and r"\[\[([ABC])\]\]" in line
    assert "first: '" in line  # the first unmatched replies, quoted
    report = _report(run)
    matrix = _section(report, "Judge × language")
    rows = [r for r in matrix.splitlines() if r.startswith("| en |")]
    broken_cell = rows[0].split("|")[2]  # columns: language, broken, fine (by name)
    assert "✓" not in broken_cell and "✗" not in broken_cell and "unreadable replies" in broken_cell
    assert "did not match the verdict pattern" in _section(report, "Diagnosis: judges whose replies could not be read")
    advice = [r for r in _section(report, "Recommendations").splitlines() if r.startswith("| broken |")]
    assert advice and all("fix its prompt or verdict pattern" in r for r in advice)  # no bias advice
    cards = decode((run / "cards.json").read_bytes())
    card = next(j for j in cards.judges if j.judge == "broken").overall
    assert card.verdict == "unreadable replies" and not card.below_chance


class _CutServer(LoopbackServer):
    """An OpenAI-compatible judge that reasons at length and is cut off before its verdict:
    every reply ends with ``finish_reason: length``."""

    def add_routes(self, app) -> None:
        from aiohttp import web

        async def chat(request):
            body = await request.json()
            return web.json_response({"model": body["model"], "choices": [{
                "message": {"role": "assistant", "content": "Let me weigh both answers carefully. First,"},
                "finish_reason": "length"}], "usage": {"prompt_tokens": 10, "completion_tokens": 8}})

        app.router.add_post("/v1/chat/completions", chat)


def test_a_judge_cut_at_max_tokens_is_told_apart(tmp_path, capsys):
    with _CutServer() as server:
        cut = {"name": "cut", "backend": "openai", "model": "m", "endpoint": f"{server.url}/v1", "max_tokens": 8,
               "verdict": {"pattern": r"\[\[([AB])\]\]"}, "retries": 0}
        code, run = _audit(tmp_path, [cut])
    assert code == EXIT_MISCONFIGURED
    line = next(x for x in capsys.readouterr().err.splitlines() if x.startswith("misconfigured: cut"))
    assert "cut at max_tokens (max_tokens 8): raise max_tokens" in line
    records = babelrun.load_run(run, ["truncated"]).to_pylist()
    assert records and all(r["truncated"] for r in records)


def test_pin_with_a_manifest_re_asks_pointwise_scores_and_check_holds_them_to_it(only, tmp_path, capsys):
    lock = tmp_path / "lock.json"
    manifest = only.parent / "manifest.yaml"
    assert main(["pin", str(only), "--out", str(lock), "--manifest", str(manifest), "--repeats", "3"]) == 0
    locked = lockfile.read(lock).judges[0]
    assert all(set(c.repeat_scores) == set(c.scores) and all(len(v) == 3 for v in c.repeat_scores.values())
               for c in locked.canary)
    f = locked.self_flip  # a scorer that gives an answer the same score each time: no self-flips
    assert f is not None and f.asked == 3 * sum(len(c.scores) for c in locked.canary) and f.flips == 0
    assert main(["check", str(lock), "--manifest", str(manifest)]) == 0
    assert lockfile.read(lock).checks[-1].flip_test == "fisher"

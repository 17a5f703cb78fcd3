"""``backend: replay``: LLMBar's published GPT-4 verdicts, replayed from a file,
give the same cards as a live (loopback) judge answering the same verdicts, with no call made.

``data/llmbar_natural_gpt4_vanilla.jsonl`` holds the verdicts of GPT-4 (LLMBar's "Vanilla"
method) on LLMBar_Natural, from github.com/princeton-nlp/LLMBar (MIT) at 900616b,
``Dataset/LLMBar/Natural/evaluators/GPT-4/Vanilla/result.json``: per pair and presentation
(``swap``), the ``winner`` (1 or 2, the data's output) and the raw completion. The pairs'
texts are not copied: the tests join them from ``../shared/data/llmbar``.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import msgspec
import pytest

from helpers import SHARED_DATA, LoopbackServer, quiet_audit, write_manifest

NATURAL = SHARED_DATA / "llmbar" / "LLMBar_Natural" / "dataset.json"
VERDICTS = Path(__file__).parent / "data" / "llmbar_natural_gpt4_vanilla.jsonl"
pytestmark = pytest.mark.skipif(not NATURAL.exists(), reason="shared LLMBar data absent")


def _published() -> dict[tuple[str, bool], dict]:
    rows = [json.loads(line) for line in VERDICTS.read_text().splitlines()]
    return {(r["id"], r["swap"]): r for r in rows}


def _result_json(path: Path) -> Path:
    """LLMBar's result.json for LLMBar_Natural, rebuilt: the data's rows with each one's results."""
    data, published = json.loads(NATURAL.read_text()), _published()
    for i, row in enumerate(data):
        row["results"] = [{f"swap = {sw}": {"completion": [published[(f"LLMBar_Natural-{i:04d}", sw)]["raw"], "stop"],
                                            "winner": published[(f"LLMBar_Natural-{i:04d}", sw)]["winner"]}
                           for sw in (False, True)}]
    path.write_text(json.dumps(data))
    return path


class PublishedJudge(LoopbackServer):
    """An OpenAI-compatible judge that answers each request with GPT-4's published verdict for
    the two answers it shows (found by their texts, as a live model sees them)."""

    def __init__(self):
        data, published = json.loads(NATURAL.read_text()), _published()
        self.answers: dict[tuple[str, str], str] = {}
        for i, row in enumerate(data):
            for swapped in (False, True):
                winner = published[(f"LLMBar_Natural-{i:04d}", swapped)]["winner"]
                a, b = (row["output_2"], row["output_1"]) if swapped else (row["output_1"], row["output_2"])
                self.answers[(a, b)] = "A" if (winner == "1") != swapped else "B"
        self.calls = 0

    def add_routes(self, app) -> None:
        from aiohttp import web

        async def chat(request):
            body = await request.json()
            self.calls += 1
            text = body["messages"][-1]["content"]

            def between(start: str, end: str) -> str:
                i = text.index(start) + len(start)
                return text[i:text.index(end, i)]

            shown = (between("[Answer A]\n", "\n[End of Answer A]"), between("[Answer B]\n", "\n[End of Answer B]"))
            return web.json_response({
                "id": "x", "object": "chat.completion", "model": "gpt-4",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": self.answers.get(shown, "?")},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 1}})

        app.router.add_post("/v1/chat/completions", chat)


def _manifest(folder: Path, judge: dict, bootstrap: int = 0) -> Path:
    folder.mkdir()
    return write_manifest(folder, [judge], corpus={
        "sources": [{"kind": "labelled_pairs", "path": str(NATURAL)}], "languages": ["en"]},
        scoring={"bootstrap": bootstrap})


def _cards_without_ids(run: Path, judge_id: str) -> bytes:
    return (run / "cards.json").read_bytes().replace(judge_id.encode(), b"<judge_id>")


def test_replayed_llmbar_verdicts_give_the_live_judges_cards_with_no_call(tmp_path, monkeypatch):
    result_json = _result_json(tmp_path / "result.json")
    with PublishedJudge() as server:
        live = quiet_audit(_manifest(tmp_path / "live", {"name": "gpt-4", "backend": "openai", "model": "gpt-4",
                                                       "endpoint": server.url + "/v1", "retries": 0}))
        live_calls = server.calls
    assert live.exit_code == 0 and live_calls == 200  # 100 pairs, both orders

    def no_network(*args, **kwargs):
        raise AssertionError("a replay judge opened a connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    replayed = quiet_audit(_manifest(tmp_path / "replay", {"name": "gpt-4", "backend": "replay",
                                                          "replay": {"path": str(result_json)}}))
    assert replayed.exit_code == 0
    (live_id,) = {j.judge_id for f in live.cards.pairs for j in f.judges}
    (replay_id,) = {j.judge_id for f in replayed.cards.pairs for j in f.judges}
    assert live_id != replay_id
    assert (_cards_without_ids(tmp_path / "live" / "run", live_id)
            == _cards_without_ids(tmp_path / "replay" / "run", replay_id))
    # LLMBar's published statistics of GPT-4 Vanilla on Natural: 95 / 100 without swap,
    # 96 / 100 with it (average 95.5 %), the same winner both ways on 95 / 100.
    (card,) = [lc.card for f in replayed.cards.pairs for j in f.judges for lc in j.languages]
    assert card.accuracy.value == 0.955 and card.order_consistency.value == 0.95
    # The raw replies are the published completions, kept in the log.
    records = [msgspec.json.decode(line) for seg in sorted((tmp_path / "replay" / "run" / "log").glob("*.jsonl"))
               for line in seg.read_bytes().splitlines()]
    assert {r["raw"] for r in records} == {"Output (a)", "Output (b)"}


def test_a_verdict_missing_from_the_file_is_not_judged(tmp_path):
    rows = [json.loads(line) for line in VERDICTS.read_text().splitlines()]
    data = json.loads(NATURAL.read_text())
    table = tmp_path / "verdicts.jsonl"
    kept = rows[: 2 * 60]  # the first 60 pairs only, both presentations
    with table.open("w") as f:
        for r in kept:
            row = data[int(r["id"].rsplit("-", 1)[1])]
            f.write(json.dumps({**r, "output_1": row["output_1"], "output_2": row["output_2"]}) + "\n")
    result = quiet_audit(_manifest(tmp_path / "partial", {"name": "gpt-4", "backend": "replay",
                                                         "replay": {"path": str(table)}}))
    (card,) = [lc.card for f in result.cards.pairs for j in f.judges for lc in j.languages]
    assert card.items == 60 and card.presentations == 120  # the other 40 pairs: not judged, never guessed
    records = [msgspec.json.decode(line) for seg in sorted((tmp_path / "partial" / "run" / "log").glob("*.jsonl"))
               for line in seg.read_bytes().splitlines()]
    missing = [r for r in records if r["status"] != "ok"]
    assert len(missing) == 80 and {r["error_kind"] for r in missing} == {"not_in_replay"}

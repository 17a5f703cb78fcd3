"""``babelrun show`` prints the messages each judge saw, whatever the shape of its prompt:
built-in pairwise, built-in pointwise, inline text, a text file, an MT-Bench collection. It
renders through the judge's own protocol (the engine's one path), so what it prints is what
was sent."""

from __future__ import annotations

import json

import pytest

import babelrun
from babelrun.app.cli import main
from helpers import SHARED_DATA, quiet_audit, simulated, write_manifest

CORPUS = {"sources": [{"kind": "bundled"}], "languages": ["en"], "references_per_language": 2}
MT_BENCH = SHARED_DATA / "judge-prompts" / "mt-bench-judge_prompts.jsonl"
PAIR_REPLY = {"pattern": r"\[\[([ABC])\]\]", "labels": {"A": "A", "B": "B", "C": "tie"}}


def _shapes(tmp_path) -> dict[str, dict]:
    text = tmp_path / "judge.txt"
    text.write_text("Q: {question}\nA: {answer_a}\nB: {answer_b}\nSay [[A]], [[B]] or [[C]].")
    shapes = {
        "builtin": simulated("builtin"),
        "pointwise": {**simulated("pointwise"), "protocol": "pointwise", "prompt": "pointwise"},
        "inline": {**simulated("inline"), "prompt": {"system": "Be fair.", "user": "{question}\n1) {answer_a}\n"
                                                     "2) {answer_b}\nWhich? [[A]]/[[B]]/[[C]]"},
                   "verdict": PAIR_REPLY},
        "textfile": {**simulated("textfile"), "prompt": str(text), "verdict": PAIR_REPLY},
    }
    if MT_BENCH.is_file():
        shapes["collection"] = {**simulated("collection"), "prompt": {"file": str(MT_BENCH), "name": "pair-v2"},
                                "verdict": PAIR_REPLY}
    return shapes


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("shapes")
    shapes = _shapes(tmp)
    path = write_manifest(tmp, list(shapes.values()), corpus=CORPUS, perturbations=[{"name": "truncate",
                          "severities": [0.5]}], scoring={"bootstrap": 0})
    quiet_audit(path)
    return tmp / "run", shapes


@pytest.mark.parametrize("shape", ["builtin", "pointwise", "inline", "textfile", "collection"])
def test_show_prints_the_messages_of_every_shape(run, shape, capsys):
    run_dir, shapes = run
    if shape not in shapes:
        pytest.skip(f"{MT_BENCH} not found (../shared/data)")
    item_id = babelrun.load_run(run_dir, ["item_id"])["item_id"][0].as_py()
    assert main(["show", str(run_dir), item_id, "--judge", shape, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    keys = {p["order"]: p for p in shown["presentations"]}
    assert set(keys) == ({"reference", "degraded"} if shape == "pointwise" else {"ref_first", "pert_first"})
    for key, p in keys.items():
        user = next(m["content"] for m in p["messages"] if m["role"] == "user")
        if shape == "pointwise":  # one answer: the reference, or the degraded one
            assert (shown["reference"] if key == "reference" else shown["perturbed"]) in user
        else:  # both answers, the reference in slot A first
            first, second = ((shown["reference"], shown["perturbed"]) if key == "ref_first"
                             else (shown["perturbed"], shown["reference"]))
            assert second in user[user.index(first) + len(first):]  # (a truncation is a prefix)
        assert shown["prompt"] in user
    assert main(["show", str(run_dir), item_id, "--judge", shape]) == 0
    text = capsys.readouterr().out
    assert text.count("--- user") == 2 and "Traceback" not in text

"""The judge_id of every judge of every bundled example, pinned: an id names everything that
can change a verdict, so a refactor of how a judge is declared (its backend's options struct,
the flat manifest) must leave every existing id as it was, and the runs under it valid."""

from __future__ import annotations

import msgspec
import pytest

from babelrun import manifest
from babelrun.errors import ManifestError
from babelrun.judges import judge_id
from helpers import ROOT

PINNED = {
    "agentic.yaml": {
        "long-lover": "2a2e282936ab",
        "tool-blind": "b7e247820b1e",
    },
    "judge-ls.yaml": {
        "english-first": "993bc7532b7e",
        "steady": "2822f61a6572",
    },
    "local.yaml": {
        "gemma-270m": "622429f03b3a",
    },
    "mitigation.yaml": {
        "leaning": "a672d8c03684",
        "leaning-length-neutral": "72ae85e20956",
        "small-1": "09b6244b8886",
        "small-2": "774a1a95beda",
        "small-3": "356c8952180b",
        "strong": "972deabe2678",
    },
    "quickstart.yaml": {
        "biased": "d41992829ccf",
        "careful": "66fabd3753d7",
    },
    "triage.yaml": {
        "length-rule": "6362bb182c78",
        "strong": "645b03ac0d8e",
    },
    "udhr-all.yaml": {
        "biased": "9fa5df50c6a4",
        "careful": "b6b384fa28ea",
    },
    "udhr.yaml": {
        "biased": "9fa5df50c6a4",
        "careful": "b6b384fa28ea",
    },
    "your-judge.yaml": {
        "team-pairwise": "bc4c2c80f590",
        "team-pointwise": "649c7d1f3e94",
    },
}


@pytest.mark.parametrize("example", sorted(PINNED))
def test_example_judge_ids_are_pinned(example, tmp_path):
    path = ROOT / "examples" / example
    try:
        loaded = manifest.load(path, environ={})
    except ManifestError:  # a data set that is not here: the judges decode all the same
        loaded = manifest.decode(msgspec.yaml.decode(path.read_bytes()))
    assert {j.name: judge_id(j) for j in loaded.judges} == PINNED[example]

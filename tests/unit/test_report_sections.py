"""One ordered list of report sections (report/sections.SECTIONS), one renderer per format."""

from __future__ import annotations

import importlib

import pytest

from babelrun.report import sections

importlib.import_module("babelrun.report.html")  # registers its renderers
importlib.import_module("babelrun.report.markdown")


@pytest.mark.parametrize("fmt", sections.FORMATS)
def test_every_section_has_a_renderer_in_each_format_in_one_order(fmt) -> None:
    got = [s.name for s, _ in sections.rendered(fmt)]
    assert got == ["matrix", "diagnosis", "leaderboard",
                   "recommendations", "cards", "pointwise", "mitigations", "agentic", "robustness",
                   "plots", "audit", "analyses", "stats", "spend", "identities", "examples"]


def test_a_section_without_a_renderer_fails_loudly(monkeypatch) -> None:
    monkeypatch.setattr(sections, "SECTIONS", (*sections.SECTIONS, sections.Section("new", "New", "nothing")))
    with pytest.raises(LookupError, match="no renderer for section"):
        sections.rendered("markdown")
    sections.renders("markdown", "new")(lambda data: ["## New"])
    assert sections.rendered("markdown")[-1][0].name == "new"
    with pytest.raises(ValueError):
        sections.renders("pdf", "new")

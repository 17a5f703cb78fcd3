"""Every committed results/*/report.html in a real browser (headless Chromium, which .ci/run
installs): no horizontal overflow at 1,280 px, every figure drawn. Skips where no Chromium is
installed."""

from __future__ import annotations

import pytest
from browser import WIDTH, find, measure, shown_views

from helpers import ROOT

PAGES = sorted((ROOT / "results").glob("*/report.html"))

pytestmark = pytest.mark.skipif(find() is None, reason="no chromium installed (apt-get install chromium)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.parent.name)
def test_report_fits_1280_pixels_and_draws_every_figure(page):
    m = measure(page)
    assert m["innerWidth"] == WIDTH
    assert m["scrollWidth"] <= WIDTH, f"{page}: {m['scrollWidth']} px wide; widest: {m['wide']}"
    assert not m["wide"], m["wide"]
    assert all(i["ok"] for i in m["imgs"]), m["imgs"]
    assert m["svgs"] and all(s["w"] > 100 and s["h"] > 100 for s in m["svgs"]), m["svgs"]
    assert len(m["svgs"]) == len(list((page.parent / "plots").glob("*.svg")))


def test_matrix_sort_links_show_one_view_without_script(tmp_path):
    """The sort links work by CSS :target alone (the page has no script): the default view
    by language until a link is followed, then only the chosen one."""
    from unit.test_report_scale import synthetic  # a helper of the scale test (tests/ is on the path)

    from babelrun.report import html

    page = tmp_path / "report.html"
    page.write_text(html.render(synthetic(3, 60), []))
    assert shown_views(page, "") == ["m-lang"]
    assert shown_views(page, "m-worst") == ["m-worst"]
    assert shown_views(page, "m-j2") == ["m-j2"]

"""The report's plot-drawing children (``plots.Painter``): started ahead of the report, the
plots shared between two children come out byte for byte as one child (and as ``render`` in
this process) draws them, in report order; a Painter closed without drawing ends its children
and writes nothing."""

from __future__ import annotations

import hashlib

import pytest
from unit.test_report_scale import synthetic  # a helper of the scale test (tests/ is on the path)

from babelrun.report import plots
from babelrun.store.files import UnsafePath


def _files(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((folder / "plots").iterdir())}


@pytest.mark.parametrize("png", [False, True])
def test_two_children_draw_what_one_draws(tmp_path, png):
    data = synthetic(judges=3, langs=12)
    here = plots.render(data, tmp_path / "here", png=png)
    drawn = {}
    for parts in (1, 2):
        with plots.Painter(tmp_path / str(parts), parts=parts, png=png) as painter:
            drawn[parts] = painter.draw(data)
    assert [p.name for p in drawn[2]] == [p.name for p in here] == [n for n, _, _ in plots.PLOTS if n in
                                                                      {p.name for p in here}]
    assert drawn[1] == drawn[2] == here
    assert _files(tmp_path / "1") == _files(tmp_path / "2") == _files(tmp_path / "here")
    assert {p.name for p in here} >= {"metrics_heatmap", "radar"}  # both groups drew something
    pngs = {p.stem for p in (tmp_path / "2" / "plots").glob("*.png")}
    assert pngs == ({p.name for p in here} if png else set())


def test_every_plot_is_in_one_group():
    names = [n for group in plots.GROUPS for n in group]
    assert sorted(names) == sorted(n for n, _, _ in plots.PLOTS)


def test_a_painter_closed_without_drawing_ends_its_children(tmp_path):
    painter = plots.Painter(tmp_path, parts=2)
    painter.close()
    assert all(proc.returncode is not None for proc in painter._procs)
    assert not (tmp_path / "plots").exists()


def test_a_link_at_plots_is_refused_by_the_painter(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "plots").symlink_to(tmp_path / "elsewhere")
    with plots.Painter(tmp_path / "out") as painter, pytest.raises(UnsafePath):
        painter.draw(synthetic(judges=1, langs=3))
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_the_second_group_is_forked_by_one_child_where_fork_is_safe(tmp_path):
    """On Linux one child imports matplotlib and forks the drawer of the second group (one
    import, not two): the plots are those of two separate children, byte for byte."""
    if not plots.painter._forks():
        pytest.skip("no fork here: each group has a child of its own")
    data = synthetic(judges=2, langs=8)
    with plots.Painter(tmp_path / "forked", parts=2) as painter:
        assert len(painter._procs) == 1
        forked = painter.draw(data)
    here = plots.render(data, tmp_path / "here")
    assert forked == here
    assert _files(tmp_path / "forked") == _files(tmp_path / "here")


def test_each_figure_is_drawn_once_per_file_it_writes(tmp_path, monkeypatch):
    """A figure laid out (``canvas.tight``) keeps no layout engine: savefig would otherwise draw
    it once for the engine before the time it writes, twice the drawing for the same file."""
    from matplotlib.figure import Figure

    drawn = []
    draw = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda self, renderer: (drawn.append(self), draw(self, renderer))[1])
    written = plots.render(synthetic(judges=3, langs=12), tmp_path, png=True)
    assert len(written) >= 4 and len(drawn) == 2 * len(written)  # an SVG and a PNG each, one draw each

"""babelrun: audit LLM judges across languages.

The public surface is small::

    import babelrun
    manifest = babelrun.load_manifest("manifest.yaml")
    result = babelrun.audit(manifest)            # resumable; returns an AuditResult
    result = await babelrun.audit_async(manifest)  # the same, inside a running event loop (Jupyter)
    cards = babelrun.score_run("runs/my-audit")  # recompute cards from the log alone
    cards.to_pandas()                            # the cards as one long table (or to_polars, to_arrow)
    table = babelrun.load_run("runs/my-audit")   # the counted records, as an Arrow table
    babelrun.export_run("runs/my-audit", fmt="csv")  # cards.csv, presentations.csv under runs/my-audit/export
    item = babelrun.show_item("runs/my-audit", "1a2b3c")  # an item as the judges saw it

Paths may be ``str`` or ``pathlib.Path`` everywhere.

These names are imported lazily (PEP 562): ``import babelrun`` loads nothing else, so a
module deep inside (``babelrun.judges.prompt``) can be imported on its own, cheaply.

The layer rule. Imports go one way, down this list; a module may import from its own layer
or any layer below it, never above (imports inside functions count), and
``tests/unit/test_layers.py`` fails on any import that breaks it::

    app        cli, audit (run files, judging, scoring, merge), cluster (Ray), benchjudge, testing
    report     data, summary, markdown, html, plots
    analyses   calibrate, invariance, agree, drift
    score      metrics, stats, cards, agentic, paired comparison, composite, run
    engine     pipeline (calls, retries, records), limits, batches, state, progress
    plan       Plan, parallel families, lookup of items by id
    manifest   load + check, through the registries below
    judges     the judge protocol, a registry of backends and their capabilities
    corpus     loaders, one registry entry a format
    agentic    trajectories, their perturbations and serialisation
    perturb    text perturbations and script-aware segmentation
    store      run directory, log, done-set, lock, compaction
    spec       the manifest's types
    core       keys, items, records, languages (values and identities, no I/O)
    errors     the one exception tree

Within ``corpus · agentic · perturb · judges`` (registries of same-shaped entries) the order
above still holds: a corpus loader may use a perturbation's segmentation, never the reverse.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .core.version import __version__

# public name -> (module, attribute), imported on first use
_LAZY = {
    "Manifest": ("babelrun.spec", "Manifest"),
    "load_manifest": ("babelrun.manifest", "load"),
    "audit": ("babelrun.app.audit", "audit"),
    "audit_async": ("babelrun.app.audit", "audit_async"),
    "score_run": ("babelrun.app.audit", "score_run"),
    "load_run": ("babelrun.app.audit", "load_run"),
    "export_run": ("babelrun.app.export", "export"),
    "show_item": ("babelrun.app.show", "show"),
    "Cards": ("babelrun.score", "Cards"),
}

if TYPE_CHECKING:
    from .app.audit import audit, audit_async, load_run, score_run
    from .app.export import export as export_run
    from .app.show import show as show_item
    from .manifest import load as load_manifest
    from .score import Cards
    from .spec import Manifest


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'babelrun' has no attribute {name!r}")
    import importlib

    module, attr = _LAZY[name]
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


# ``babelrun.score`` is the scoring subpackage (metrics, bootstrap); ``score_run`` is the verb.
__all__ = ["Cards", "Manifest", "__version__", "audit", "audit_async", "export_run", "load_manifest", "load_run",
           "score_run", "show_item"]

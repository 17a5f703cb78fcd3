"""babelrun: audit LLM judges across languages.

The public surface is small::

    import babelrun
    manifest = babelrun.load_manifest("manifest.yaml")
    result = babelrun.audit(manifest)            # resumable; returns an AuditResult
    cards = babelrun.score_run("runs/my-audit")  # recompute cards from the log alone
    table = babelrun.load_run("runs/my-audit")   # the counted records, as an Arrow table

These names are imported lazily (PEP 562): ``import babelrun`` loads nothing else, so a
module deep inside (``babelrun.judges.prompt``) can be imported on its own, cheaply.

The layer rule. Imports go one way, down this list; a module may import from its own layer
or any layer below it, never above (imports inside functions count), and
``tests/test_layers.py`` fails on any import that breaks it::

    app        cli, audit (phases, merge, the finish), cluster (Ray), benchjudge, testing
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

from importlib import metadata as _metadata
from typing import TYPE_CHECKING

try:
    __version__ = _metadata.version("babelrun")
except _metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0.0.0+unknown"

# public name -> (module, attribute), imported on first use
_LAZY = {
    "Manifest": ("babelrun.spec", "Manifest"),
    "load_manifest": ("babelrun.manifest", "load"),
    "audit": ("babelrun.app.audit", "audit"),
    "score_run": ("babelrun.app.audit", "score_run"),
    "load_run": ("babelrun.store.compact", "load"),
}

if TYPE_CHECKING:
    from .app.audit import audit, score_run
    from .manifest import load as load_manifest
    from .spec import Manifest
    from .store.compact import load as load_run


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
__all__ = ["Manifest", "__version__", "audit", "load_manifest", "load_run", "score_run"]

"""babelrun: audit LLM judges across languages.

The public surface is small::

    import babelrun
    manifest = babelrun.load_manifest("manifest.yaml")
    result = babelrun.audit(manifest)          # resumable; returns an AuditResult
    cards = babelrun.score_run("runs/my-audit")  # recompute cards from the log alone
    table = babelrun.load_run("runs/my-audit") # the counted records, as an Arrow table
"""

__version__ = "0.1.0"

from .compact import load as load_run  # noqa: E402
from .manifest import Manifest  # noqa: E402
from .manifest import load as load_manifest  # noqa: E402
from .run import audit, score_run  # noqa: E402

# ``babelrun.score`` is the scoring subpackage (metrics, bootstrap); ``score_run`` is the verb.
__all__ = ["Manifest", "__version__", "audit", "load_manifest", "load_run", "score_run"]

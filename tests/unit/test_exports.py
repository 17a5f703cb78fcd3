"""The public surface (as httpx's test_exported_members and trio's test_exports check theirs):
``babelrun`` exports exactly its documented names, each resolves lazily to what it claims to
be, and importing the package loads none of them."""

import subprocess
import sys
from importlib import metadata

import babelrun

PUBLIC = {"Cards", "Manifest", "__version__", "audit", "audit_async", "export_run", "load_manifest", "load_run",
          "score_run", "show_item"}


def test_all_is_the_public_surface():
    assert set(babelrun.__all__) == PUBLIC
    assert PUBLIC <= set(dir(babelrun))


def test_every_export_resolves_to_its_implementation():
    from babelrun.app.audit import audit, audit_async, load_run, score_run
    from babelrun.app.export import export
    from babelrun.app.show import show
    from babelrun.manifest import load
    from babelrun.score import Cards
    from babelrun.spec import Manifest

    assert (babelrun.audit, babelrun.audit_async, babelrun.score_run, babelrun.load_manifest, babelrun.Manifest,
            babelrun.load_run, babelrun.export_run, babelrun.show_item, babelrun.Cards) == (
        audit, audit_async, score_run, load, Manifest, load_run, export, show, Cards)


def test_unknown_attribute_is_an_attribute_error():
    try:
        babelrun.no_such_name  # noqa: B018
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("expected AttributeError")


def test_version_is_the_installed_metadata():
    assert babelrun.__version__ == metadata.version("babelrun")


def test_import_is_lazy():
    code = "import sys, babelrun; print(sorted(m for m in sys.modules if m.startswith('babelrun')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['babelrun', 'babelrun.core', 'babelrun.core.version']"  # the version only

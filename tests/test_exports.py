"""The public surface (as httpx's test_exported_members and trio's test_exports check theirs):
``babelrun`` exports exactly its documented names, each resolves lazily to what it claims to
be, and importing the package loads none of them."""

import subprocess
import sys
from importlib import metadata

import babelrun

PUBLIC = {"Manifest", "__version__", "audit", "load_manifest", "load_run", "score_run"}


def test_all_is_the_public_surface():
    assert set(babelrun.__all__) == PUBLIC
    assert PUBLIC <= set(dir(babelrun))


def test_every_export_resolves_to_its_implementation():
    from babelrun.app.audit import audit, score_run
    from babelrun.manifest import load
    from babelrun.spec import Manifest
    from babelrun.store.compact import load as load_run

    assert (babelrun.audit, babelrun.score_run, babelrun.load_manifest, babelrun.Manifest, babelrun.load_run) == (
        audit, score_run, load, Manifest, load_run)


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
    assert out.stdout.strip() == "['babelrun']"

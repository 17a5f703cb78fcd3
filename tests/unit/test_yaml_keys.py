"""A manifest's keys as written (babelrun/core/yaml_keys.py): YAML 1.1 reads a bare ``on`` as
true, so ``stopping: {on: verdict}`` (as docs/stopping.md writes it) was refused; a boolean-looking
key is now its text, and nothing else a manifest says reads differently."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from babelrun import manifest
from babelrun.core import yaml_keys
from babelrun.errors import ManifestError
from babelrun.spec import Manifest
from helpers import ROOT

HEAD = "name: t\njudges: [{name: s, backend: simulated}, {name: s2, backend: simulated, model: other}]\n"


def _load(tmp_path: Path, body: str) -> Manifest:
    path = tmp_path / "m.yaml"
    path.write_text(HEAD + body, encoding="utf-8")
    return manifest.load(path, environ={})


@pytest.mark.parametrize("key", ["on", "'on'", '"on"'])
def test_the_stopping_key_reads_as_the_docs_write_it(tmp_path, key):
    got = _load(tmp_path, f"stopping: {{{key}: width, width: 0.05, min_items: 30}}\n")
    assert got.stopping is not None and (got.stopping.on, got.stopping.width) == ("width", 0.05)


def test_another_boolean_word_is_an_unknown_field_named_as_written(tmp_path):
    with pytest.raises(ManifestError, match=r"stopping\.yes: unknown field"):
        _load(tmp_path, "stopping: {yes: width}\n")


def test_boolean_values_read_as_before(tmp_path):
    got = _load(tmp_path, "composites: [{kind: cascade, name: c, cheap: s, strong: s2, on_flip: no}]\n"
                          "stopping: {on: verdict, per_perturbation: yes}\n")
    assert got.composites[0].on_flip is False and got.stopping is not None and got.stopping.per_perturbation is True


def test_not_yaml_is_a_decode_error_as_before():
    with pytest.raises(msgspec.DecodeError):
        yaml_keys.decode(b"name: t\njudges: [{name: s\n", Manifest)


@pytest.mark.parametrize("example", sorted((ROOT / "examples").glob("*.yaml")), ids=lambda p: p.name)
def test_the_bundled_examples_decode_as_msgspec_decodes_them(example):
    raw = example.read_bytes()
    try:
        expected = msgspec.yaml.decode(raw, type=Manifest)
    except msgspec.ValidationError:
        pytest.skip(f"{example.name} is no manifest")
    assert yaml_keys.decode(raw, Manifest) == expected

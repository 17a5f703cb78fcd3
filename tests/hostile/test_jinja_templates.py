"""Hostile prompt templates: a Jinja2 template or a prompt file is data (DESIGN.md, Trust).
It cannot reach Python objects, read another file, run code, or grow without bound; each is
refused at validate in one line (exit 2, nothing written) or, where only a render shows it,
stopped by the sandbox's bounds (judges/jinja.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from babelrun import manifest
from babelrun.errors import ManifestError
from babelrun.judges import jinja
from helpers import ROOT, write_manifest

ANSWERS = "A: {{ answer_a }}\nB: {{ answer_b }}\n"
REACHING = {
    "mro": "{{ ''.__class__.__mro__ }}\n" + ANSWERS,
    "include": "{% include '/etc/hostname' %}\n" + ANSWERS,
    "item": "{{ answer_a['__class__'] }}\n" + ANSWERS,
    "import": "{% import '/etc/hostname' as h %}\n" + ANSWERS,
    "extends": "{% extends '/etc/hostname' %}",
    "call": "{{ answer_a.center(1000000000) }}\n" + ANSWERS,
    "set": "{% set x = answer_a ~ answer_a %}{{ x }}\n" + ANSWERS,
    "macro": "{% macro f() %}{{ f() }}{% endmacro %}\n" + ANSWERS,
    "filter": "{{ answer_a | indent(1000000) }}\n" + ANSWERS,
    "repeat": "{{ 'x' * 1000000000 }}\n" + ANSWERS,
    "power": "{{ 9 ** 999999 }}\n" + ANSWERS,
    "format": "{{ '%999999999s' % answer_a }}\n" + ANSWERS,
    "undefined": "{{ not_a_field }}\n" + ANSWERS,
    "range": "{% for i in range(100000) %}{% endfor %}\n" + ANSWERS,
}


@pytest.mark.parametrize("name", ["mro", "include"])
def test_the_cli_refuses_a_template_that_reaches_objects_or_files_and_writes_nothing(tmp_path, name):
    (tmp_path / "judge.j2").write_text(REACHING[name])
    m = write_manifest(tmp_path, [{"name": "j", "backend": "simulated", "prompt": {"file": "judge.j2"}}])
    before = sorted(p.name for p in tmp_path.iterdir())
    for command in ("validate", "audit"):
        done = subprocess.run([sys.executable, "-m", "babelrun", command, str(m)], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert done.stderr.strip().count("\n") == 0 and "judges[0].prompt" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr and "hostname" not in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no run directory, nothing else


@pytest.mark.parametrize("name", sorted(REACHING))
def test_each_hostile_template_is_refused_at_validate_in_one_line(tmp_path, name):
    m = write_manifest(tmp_path, [{"name": "j", "backend": "simulated", "prompt": {"user": REACHING[name]}}])
    with pytest.raises(ManifestError) as info:
        manifest.load(m)
    assert info.value.path.startswith("judges[0].prompt") and "\n" not in info.value.problem
    assert not (tmp_path / "run").exists()


def test_loops_and_output_are_bounded_when_rendered():
    long = "x" * 5000
    nested = "{% for a in answer_a %}{% for b in answer_b %}{% endfor %}{% endfor %}"
    names, outputs = jinja.check(nested)
    with pytest.raises(jinja.JinjaError, match="loop iterations"):
        jinja.render(nested, {"answer_a": long, "answer_b": long}, outputs)
    echo = "{% for c in answer_a %}{{ answer_a }}{% endfor %}"
    with pytest.raises(jinja.JinjaError, match="rendered prompt passed"):
        jinja.render(echo, {"answer_a": "y" * 2000}, jinja.check(echo)[1])
    assert jinja.render(echo, {"answer_a": "ab"}, jinja.check(echo)[1]) == "abab"  # within its bound


def test_an_alpaca_eval_config_cannot_name_a_prompt_file_outside_its_folder(tmp_path):
    folder = tmp_path / "evaluators_configs" / "mine"
    folder.mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("{instruction} {output_1} {output_2} secret")
    for template in ("../secret.txt", "../../secret.txt", str(tmp_path / "secret.txt")):
        (folder / "configs.yaml").write_text(f"mine:\n  prompt_template: {template!r}\n"
                                             "  fn_completion_parser: ranking_parser\n")
        m = write_manifest(tmp_path, [{"name": "j", "backend": "simulated",
                                       "prompt": {"file": str(folder / "configs.yaml")}}])
        with pytest.raises(ManifestError, match="leaves its folder|is not next to it"):
            manifest.load(m)

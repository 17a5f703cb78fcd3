"""judge_id covers what changes a reply: the key variable, headers and the variables they come
from (names, never values), organisation and project, and a code judge's code; the lock check
compares the same fields. A judge that sets none of these keeps the id it had."""

from __future__ import annotations

import sys

import pytest

from babelrun.app import recheck
from babelrun.judges import judge_id, judge_spec, rule
from babelrun.judges.identity import ROUTING_FIELDS, code_identity, module_origin

OPENAI = {"name": "j", "backend": "openai", "model": "m", "endpoint": "http://127.0.0.1:9/v1"}
PYTHON = {"name": "p", "backend": "python", "callable": "json:dumps"}

# For every field the lock check compares: a judge, and the same judge with only that field changed.
CHANGED = {
    "backend": (OPENAI, {"backend": "vllm"}),
    "model": (OPENAI, {"model": "m2"}),
    "endpoint": (OPENAI, {"endpoint": "http://127.0.0.1:10/v1"}),
    "api_key_env": ({**OPENAI, "api_key_env": "KEY_A"}, {"api_key_env": "KEY_B"}),
    "headers": (OPENAI, {"headers": {"X-Route": "eu"}}),
    "headers_env": (OPENAI, {"headers_env": {"X-Route": "ROUTE"}}),
    "organization": (OPENAI, {"organization": "org-2"}),
    "project": (OPENAI, {"project": "proj-2"}),
    "azure": ({**OPENAI, "backend": "azure"}, {"azure": {"deployment": "d2"}}),
    "callable": (PYTHON, {"callable": "json:loads"}),
    "version": (PYTHON, {"version": "2"}),
}


def test_every_field_the_lock_check_compares_is_part_of_the_judge_id():
    assert recheck.BOUND_FIELDS == ROUTING_FIELDS and set(CHANGED) == set(ROUTING_FIELDS)
    for field, (base, change) in CHANGED.items():
        assert judge_id(judge_spec(**base)) != judge_id(judge_spec(**{**base, **change})), field


def test_a_header_value_and_each_header_count():
    one = judge_id(judge_spec(**OPENAI, headers={"X-Route": "eu"}))
    assert one != judge_id(judge_spec(**OPENAI, headers={"X-Route": "us"}))
    assert one != judge_id(judge_spec(**OPENAI, headers={"X-Route": "eu", "X-Tier": "1"}))
    assert one == judge_id(judge_spec(**OPENAI, headers={"X-Route": "eu"}))


def test_unset_fields_keep_the_id_a_judge_had():
    """Set to their defaults (run.yaml writes them so), the new fields change no id."""
    plain = judge_id(judge_spec(**OPENAI))
    assert plain == judge_id(judge_spec(**OPENAI, headers={}, headers_env={}, organization=None, project=None,
                                        api_key_env=None))
    assert plain != judge_id(judge_spec(**OPENAI, api_key_env="OPENAI_API_KEY"))  # named: a new judge


def test_headers_env_is_its_variables_names_never_their_values(monkeypatch):
    spec = judge_spec(**OPENAI, headers_env={"X-Token": "ROUTE_TOKEN"})
    monkeypatch.setenv("ROUTE_TOKEN", "first-secret")
    first = judge_id(spec)
    monkeypatch.setenv("ROUTE_TOKEN", "second-secret")
    assert judge_id(spec) == first
    assert first != judge_id(judge_spec(**OPENAI, headers_env={"X-Token": "OTHER_TOKEN"}))


def _module(folder, name: str, body: str) -> None:
    (folder / f"{name}.py").write_text(body)


def test_a_python_judges_source_is_its_identity(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    _module(tmp_path, "graderid", "def grade(request):\n    return 'A'\n")
    spec = judge_spec(name="p", backend="python", callable="graderid:grade")
    first = judge_id(spec)
    assert judge_id(spec) == first  # read again: the same
    _module(tmp_path, "graderid", "def grade(request):\n    return 'B'  # now the other\n")
    assert judge_id(spec) != first
    assert "graderid" not in sys.modules  # found, never imported


def test_a_declared_version_stands_for_the_source(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    _module(tmp_path, "gradever", "def grade(request):\n    return 'A'\n")
    v1 = judge_spec(name="p", backend="python", callable="gradever:grade", version="1")
    first = judge_id(v1)
    _module(tmp_path, "gradever", "def grade(request):\n    return 'B'  # a refactor the user calls the same\n")
    assert judge_id(v1) == first
    assert judge_id(judge_spec(name="p", backend="python", callable="gradever:grade", version="2")) != first


def test_finding_a_module_in_a_package_imports_nothing(tmp_path, monkeypatch):
    """importlib.util.find_spec('pkg.mod') imports pkg; the identity must run no code."""
    monkeypatch.syspath_prepend(str(tmp_path))
    package = tmp_path / "idpkg"
    package.mkdir()
    marker = tmp_path / "IMPORTED"
    (package / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (package / "judge.py").write_text(f"open({str(marker)!r}, 'w').close()\ndef grade(request):\n    return 'A'\n")
    assert module_origin("idpkg.judge") == str(package / "judge.py")
    assert code_identity("idpkg.judge")["source"] != "not found"
    judge_id(judge_spec(name="p", backend="python", callable="idpkg.judge:grade"))
    assert not marker.exists() and "idpkg" not in sys.modules


def test_a_module_already_imported_is_the_file_it_came_from():
    assert module_origin("babelrun.judges.rule") == rule.__file__
    assert code_identity("builtins") == {"source": "built-in"}
    assert code_identity("no_such_module_here") == {"source": "not found"}


def test_a_python_rules_registered_function_is_its_identity(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(rule, "FUNCTIONS", {})
    spec = judge_spec(name="r", backend="rule", rule={"kind": "python", "function": "mine"})
    ids = []
    for version, body in enumerate(["def score(p, a):\n    return len(a)\n",
                                    "def score(p, a):\n    return -len(a)  # the other way round\n"]):
        name = f"rulemod{version}"
        _module(tmp_path, name, body)
        module = __import__(name)
        rule.register("mine", module.score)
        ids.append(judge_id(spec))
    assert ids[0] != ids[1]
    declared = judge_spec(name="r", backend="rule", rule={"kind": "python", "function": "mine"}, version="7")
    assert judge_id(declared) not in ids


def test_a_version_on_a_rule_that_is_no_code_is_refused():
    spec = judge_spec(name="r", backend="rule", rule={"kind": "length"}, version="1")
    assert rule.check(spec, {}) is not None and rule.check(spec, {})[0] == "version"


@pytest.mark.parametrize("version", ["", "x" * 201])
def test_a_version_is_short_text(version):
    with pytest.raises(Exception, match="version"):
        judge_spec(name="p", backend="python", callable="json:dumps", version=version)

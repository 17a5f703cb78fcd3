"""Files that come in, and numbers that bound a run, refused in one line before anything is
written: a cue file that is a YAML alias bomb, prices and cache sizes that are not finite,
budgets that are not above 0, label CSVs with short rows, huge cells, a column named twice or
a FIFO, a label file that names no pair, a FIFO price file, an alpaca_eval config whose
prompt_template points anywhere on the disk."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from babelrun.app.cli import main
from babelrun.testing import FakeJudgeServer
from helpers import ROOT, write_manifest

CORPUS = {"sources": [{"kind": "bundled"}], "languages": ["en"], "references_per_language": 2}
SIM = {"name": "s", "backend": "simulated"}
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8))


def _refused(capsys, path, field: str, says: str, commands=("validate", "audit")) -> None:
    for command in commands:
        assert main([command, str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and field in err and says in err, err
    assert not (path.parent / "run").exists()  # nothing written


def test_a_cue_file_alias_bomb_is_refused_by_the_yaml_bounds(tmp_path, capsys):
    (tmp_path / "cues.yaml").write_text(BOMB)  # 9**9 nodes expanded: minutes and gigabytes if built
    assert len(BOMB) < 600
    path = write_manifest(tmp_path, [SIM], corpus=CORPUS,
                          perturbations=[{"name": "authority", "cues": str(tmp_path / "cues.yaml")}])
    started = time.perf_counter()
    _refused(capsys, path, "perturbations[0].cues", "YAML aliases", commands=("validate",))
    print(f"refused in {time.perf_counter() - started:.3f} s")  # the event-stream check: nothing is built


@pytest.mark.parametrize(("price", "field"), [
    ({"input_per_mtok": float("inf")}, "judges[0].price.input_per_mtok"),
    ({"input_per_mtok": 1.0, "output_per_mtok": float("nan")}, "judges[0].price.output_per_mtok"),
    ({"input_per_mtok": 1.0, "cached_input_per_mtok": float("-inf")}, "judges[0].price.cached_input_per_mtok"),
])
def test_a_price_that_is_not_finite_is_refused_at_validate(price, field, tmp_path, capsys):
    judge = {"name": "j", "backend": "openai", "model": "m", "endpoint": "http://127.0.0.1:9/v1", "price": price}
    _refused(capsys, write_manifest(tmp_path, [judge], corpus=CORPUS), field, "")


def test_a_cache_size_that_is_not_finite_is_refused_at_validate(tmp_path, capsys):
    path = write_manifest(tmp_path, [SIM], corpus=CORPUS, cache={"dir": str(tmp_path / "c"), "max_mb": float("inf")})
    _refused(capsys, path, "cache.max_mb", "")
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("budget", ["0", "-5", "nan", "-inf", "inf"])
def test_a_budget_that_is_not_a_finite_amount_above_zero_is_refused_before_any_call(budget, tmp_path, capsys):
    with FakeJudgeServer() as server:
        judge = {"name": "j", "backend": "openai", "model": "m", "endpoint": server.url,
                 "price": {"input_per_mtok": 1.0}}
        path = write_manifest(tmp_path, [judge], corpus=CORPUS)
        assert main(["audit", str(path), f"--budget={budget}"]) == 2
        assert server.requests == 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--budget" in err
    assert not (tmp_path / "run").exists()


def _labelled(tmp_path, labels: str):
    return write_manifest(tmp_path, [SIM], corpus={"sources": [{"kind": "labelled_pairs", "labels": labels}]})


def _first_pair_ids(n: int) -> list[str]:
    from babelrun.corpus import labelled

    ids = []
    for pair_id, _, _ in labelled.rows_of(labelled.bundled_path()):
        if pair_id not in ids:
            ids.append(pair_id)
    return ids[:n]


@pytest.mark.parametrize(("body", "says"), [
    ("item,label\n{a}\n", "1 cells where the header has 2"),  # a short row
    ("item,label\n{a},1,extra\n", "3 cells where the header has 2"),
    ("item,label\n{a},1{huge}\n", "not a readable CSV row"),  # a 128 KiB cell: past the csv module's limit
    ("item,label\n{a},{big}\n", "a cell longer than"),
    ("item,label,label\n{a},1,2\n", "named twice"),
])
def test_a_bad_label_csv_is_one_line(body, says, tmp_path, capsys):
    (a,) = _first_pair_ids(1)
    (tmp_path / "labels.csv").write_text(body.format(a=a, huge="x" * (128 << 10), big="1" + " " * 2000))
    _refused(capsys, _labelled(tmp_path, str(tmp_path / "labels.csv")), "corpus.sources[0].labels", says,
             commands=("validate",))


def _validate_in_a_subprocess(path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "babelrun", "validate", str(path)], cwd=ROOT,
                          capture_output=True, timeout=60)


def test_a_fifo_label_file_or_price_file_is_refused_and_never_waited_on(tmp_path):
    os.mkfifo(tmp_path / "labels.csv")
    done = _validate_in_a_subprocess(_labelled(tmp_path, str(tmp_path / "labels.csv")))
    err = done.stderr.decode().strip()
    assert done.returncode == 2 and len(err.splitlines()) == 1 and "not a regular file" in err, err
    (tmp_path / "p").mkdir()
    os.mkfifo(tmp_path / "p" / "prices.yaml")
    judge = {"name": "j", "backend": "openai", "model": "m", "endpoint": "http://127.0.0.1:9/v1",
             "price_file": "prices.yaml"}
    done = _validate_in_a_subprocess(write_manifest(tmp_path / "p", [judge], corpus=CORPUS))
    err = done.stderr.decode().strip()
    assert done.returncode == 2 and len(err.splitlines()) == 1 and "judges[0].price_file" in err, err
    assert "not a regular file" in err


def test_a_label_file_that_names_no_pair_is_refused_and_one_that_names_some_is_warned(tmp_path, capsys):
    (tmp_path / "none.csv").write_text("item,label\nno-such-pair,1\nnor-this,2\n")
    _refused(capsys, _labelled(tmp_path, str(tmp_path / "none.csv")), "corpus.sources[0].labels",
             "none of its 2 item ids is a pair's id", commands=("validate",))
    a, b = _first_pair_ids(2)
    (tmp_path / "some.csv").write_text(f"item,label\n{a},1\n{b},2\nno-such-pair,1\n")
    assert main(["validate", str(_labelled(tmp_path, str(tmp_path / "some.csv")))]) == 0
    err = capsys.readouterr().err
    assert "warning: corpus.sources[0].labels: 2 of the file's 3 item ids name a pair" in err


def test_an_alpaca_eval_config_keeps_its_prompt_template_to_its_own_layout(tmp_path, capsys):
    configs = tmp_path / "evaluators_configs" / "mine"
    configs.mkdir(parents=True)
    secret = tmp_path / "secret.txt"
    secret.write_text("<|im_start|>user\n{instruction} {output_1} {output_2}<|im_end|>")
    for template in (str(secret), "../../secret.txt", "../secret.txt"):
        (configs / "configs.yaml").write_text(f"mine:\n  prompt_template: {template!r}\n"
                                              "  fn_completion_parser: ranking_parser\n")
        judge = {"name": "j", "backend": "openai", "model": "m", "endpoint": "http://127.0.0.1:9/v1",
                 "prompt": {"file": str(configs / "configs.yaml")}}
        path = write_manifest(tmp_path, [judge], corpus=CORPUS)
        assert main(["validate", str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "prompt_template" in err and "refused" in err, err

import pytest

from babelrun import manifest
from babelrun.app.cli import main
from babelrun.errors import ManifestError
from helpers import simulated, write_manifest

GOOD_JUDGE = {"name": "j", "backend": "simulated"}


def _error_for(tmp_path, text: str, env=None) -> ManifestError:
    path = tmp_path / "m.yaml"
    path.write_text(text)
    with pytest.raises(ManifestError) as info:
        manifest.load(path, environ=env or {})
    return info.value


BASE = "name: t\noutput_dir: out\njudges:\n  - {name: j, backend: simulated}\n"


@pytest.mark.parametrize(("text", "path", "words"), [
    ("name: t\njudges: []\ncolour: red\n", "colour", "unknown field"),
    ("judges:\n  - {name: j, backend: simulated}\n", "name", "required field is missing"),
    (BASE.replace("judges:\n  - {name: j, backend: simulated}",
                  "judges:\n  - {name: j, backend: simulated}\n"
                  "  - {name: k, backend: openai, model: m, rate_limit: {rpm: fast}}"),
     "judges[1].rate_limit.rpm", "expected `float"),
    (BASE.replace("backend: simulated", "backend: simulated, temprature: 0"), "judges[0].temprature", "unknown field"),
    (BASE.replace("backend: simulated", "backend: telepathy"), "judges[0].backend", "unknown backend 'telepathy'"),
    (BASE + "seed: abc\n", "seed", "expected `int`"),
    (BASE + "corpus: {languages: [en, xx]}\n", "corpus.languages[1]", "'xx' is not"),
    (BASE + "corpus: {languages: [de]}\n", "corpus.languages[0]", "not in the corpus"),
    (BASE + "corpus: {languages: [hi], parallel: {pivot: en}}\n", "corpus.parallel.pivot", "not among"),
    (BASE + "perturbations: [{name: truncate}, {name: scramble}]\n", "perturbations[1].name", "unknown perturbation"),
    (BASE + "perturbations: [{name: truncate, severities: [0.3, 1.5]}]\n", "perturbations[0].severities[1]", "<= 1.0"),
    (BASE + "corpus: {sources: [{kind: jsonl, path: nowhere.jsonl}]}\n", "corpus.sources[0].path", "file not found"),
    (BASE + "corpus: {sources: [{kind: xlsx}]}\n", "corpus.sources[0].kind", "invalid value 'xlsx'"),
    (BASE.replace("{name: j, backend: simulated}", "{name: j, backend: openai, model: m, api_key_env: NOPE_KEY}"),
     "judges[0].api_key_env", "NOPE_KEY is not set"),
    (BASE.replace("{name: j, backend: simulated}", "{name: j, backend: simulated}\n  - {name: j, backend: simulated}"),
     "judges[1].name", "duplicate"),
    (BASE.replace("backend: simulated", "backend: simulated, simulated: {position_bias: 0.7, verbosity_bias: 0.5}"),
     "judges[0].simulated", "must not exceed 1"),
    (BASE.replace("backend: simulated", "backend: simulated, concurrency: 0"), "judges[0].concurrency", ">= 1"),
    # the call limits are one section (JudgeSpec.limits) written flat: errors name the flat field
    (BASE.replace("judges:\n  - {name: j, backend: simulated}",
                  "judges:\n  - {name: j, backend: simulated}\n  - {name: k, backend: simulated, timeout_s: fast}"),
     "judges[1].timeout_s", "expected `float`"),
    (BASE.replace("backend: simulated", "backend: simulated, max_consecutive_failures: 0"),
     "judges[0].max_consecutive_failures", ">= 1"),
])
def test_each_error_names_its_field(tmp_path, text, path, words):
    err = _error_for(tmp_path, text)
    assert err.path == path
    assert words in err.problem
    assert str(err).startswith(f"{tmp_path / 'm.yaml'}: {path}: ")


def test_cli_prints_one_line_exits_2_and_writes_nothing(tmp_path, capsys):
    path = write_manifest(tmp_path, [simulated(accuracy={"en": 2.0})])
    assert main(["audit", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "judges[0].simulated.accuracy.en" in err[0] and "probability in [0, 1]" in err[0]
    assert not (tmp_path / "run").exists()


def test_not_yaml_and_missing_file(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    assert main(["validate", str(bad)]) == 2
    assert "not valid YAML" in capsys.readouterr().err
    assert main(["validate", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read manifest" in capsys.readouterr().err


def test_defaults_and_path_resolution(tmp_path):
    (tmp_path / "sub").mkdir()
    data = tmp_path / "sub" / "refs.jsonl"
    data.write_text('{"q": "Q?", "a": "One 1. Two 2. Three.", "language": "swa"}\n')
    path = tmp_path / "sub" / "m.yaml"
    path.write_text("name: t\njudges: [{name: j, backend: simulated}]\n"
                    "corpus: {sources: [{kind: jsonl, path: refs.jsonl, columns: {prompt: q, reference: a}}]}\n")
    m = manifest.load(path, environ={})
    assert m.run_dir == tmp_path / "sub" / "runs" / "t"
    assert [p.name for p in m.perturbations] == ["truncate", "shuffle", "number_corrupt", "drop_entities", "repeat_pad"]
    assert all(p.severities == [0.3, 0.6] for p in m.perturbations)
    from babelrun import corpus
    refs = corpus.select(m).references
    assert [(r.lang, r.prompt) for r in refs] == [("sw", "Q?")]


@pytest.mark.parametrize(("text", "path", "suggestion"), [
    (BASE.replace("backend: simulated", "backend: simulated, base: x"), "judges[0].base", None),  # a composite's
    (BASE.replace("backend: simulated", "backend: simulated, cache: x"), "judges[0].cache", None),  # never 'scale'
    # a backend's own options: the did-you-mean of that backend's fields (and the common ones)
    (BASE.replace("backend: simulated", "backend: simulated, batch_sise: 4"), "judges[0].batch_sise", "batch_size"),
    (BASE.replace("backend: simulated", "backend: rule, rule: {kind: length}, simulatd: {}"), "judges[0].simulatd",
     None),  # 'simulated' is the simulated backend's, never offered to a rule judge
    (BASE + "scoring: {bootstrapp: 10}\n", "scoring.bootstrapp", "bootstrap"),
    (BASE + "corpus: {sources: [{kind: jsonl, paht: x}]}\n", "corpus.sources[0].paht", "path"),
    (BASE + "corpus: {sources: [{kind: bundled, paht: x}]}\n", "corpus.sources[0].paht", None),  # it has none
    (BASE + "corpus: {sources: [{kind: labelled_pairs, colums: {}}]}\n", "corpus.sources[0].colums", "columns"),
    (BASE + "corpus: {sources: [{kind: jsonl, path: x, delimiters: x}]}\n", "corpus.sources[0].delimiters",
     None),  # a csv source's field, not a jsonl one's
    (BASE.replace("backend: simulated", "backend: simulated, simulated: {acuracy: 0.9}"),
     "judges[0].simulated.acuracy", "accuracy"),
    (BASE.replace("backend: simulated", "backend: simulated, verdict: {patern: x}"), "judges[0].verdict.patern",
     "pattern"),
    (BASE.replace("backend: simulated", "backend: simulated, timout_s: 3"), "judges[0].timout_s", "timeout_s"),
    (BASE.replace("backend: simulated", "backend: simulated, rate_limit: {rpmm: 3}"), "judges[0].rate_limit.rpmm",
     "rpm"),
])
def test_did_you_mean_draws_only_from_the_fields_valid_there(tmp_path, text, path, suggestion):
    error = _error_for(tmp_path, text)
    assert error.path == path and error.problem.startswith("unknown field")
    if suggestion is None:
        assert "did you mean" not in error.problem
    else:
        assert error.problem.endswith(f"did you mean {suggestion!r}?")


def test_an_option_of_another_backend_names_whose_it_is(tmp_path):
    error = _error_for(tmp_path, BASE.replace("backend: simulated", "backend: simulated, prompt_cache: true"))
    assert error.path == "judges[0].prompt_cache"
    assert error.problem == "does not apply to the simulated backend (it is an option of: anthropic)"
    error = _error_for(tmp_path, BASE.replace("backend: simulated", "backend: openai, model: m, batch_size: 4"))
    assert error.path == "judges[0].batch_size" and "it is an option of: simulated, llamacpp, mlx" in error.problem


def test_fields_at_follows_lists_unions_and_optionals():
    assert "bootstrap" in manifest.fields_at("scoring") and "model" not in manifest.fields_at("scoring")
    assert {"pairs_per_set", "path", "format"} <= set(manifest.fields_at("corpus.sources[3]"))  # every source kind
    assert "position_bias" in manifest.fields_at("judges[2].simulated")
    assert manifest.fields_at("judges[0].verdict.labels") == []
    assert {"timeout_s", "rate_limit", "model"} <= set(manifest.fields_at("judges[0]"))  # flat, as written
    assert "limits" not in manifest.fields_at("judges[0]")
    assert manifest.fields_at("judges[0].rate_limit") == ["rpm", "tpm"]


def test_call_limits_are_read_and_written_flat(tmp_path):
    """The call limits decode into one section and are written back flat (run.yaml, lock
    files): the section's own name is no manifest field."""
    from babelrun.spec.flat import decode_manifest, flat_manifest

    limits = {"concurrency": 3, "adaptive_concurrency": True, "rate_limit": {"rpm": 60.0, "tpm": None},
              "timeout_s": 7.5, "retries": 2, "max_consecutive_failures": 4}
    m = manifest.load(write_manifest(tmp_path, [{**GOOD_JUDGE, **limits}]), environ={})
    judge = m.judges[0]
    assert (judge.concurrency, judge.timeout_s, judge.rate_limit.rpm) == (3, 7.5, 60.0)
    assert judge.limits.retries == 2 and judge.max_consecutive_failures == 4 and judge.adaptive_concurrency
    flat = flat_manifest(m)["judges"][0]
    assert "limits" not in flat and {k: flat[k] for k in limits} == limits
    assert decode_manifest(flat_manifest(m)) == m
    error = _error_for(tmp_path, BASE.replace("backend: simulated", "backend: simulated, limits: {retries: 2}"))
    assert error.path == "judges[0].limits" and error.problem.startswith("unknown field")


def test_references_per_language_is_refused_on_a_corpus_of_labelled_pairs_only(tmp_path):
    body = BASE + "corpus: {sources: [{kind: labelled_pairs}], references_per_language: 3}\n"
    error = _error_for(tmp_path, body)
    assert error.path == "corpus.references_per_language" and "pairs_per_set" in error.problem
    ok = BASE + "corpus: {sources: [{kind: labelled_pairs, pairs_per_set: 3}]}\n"
    (tmp_path / "ok.yaml").write_text(ok)
    assert manifest.load(tmp_path / "ok.yaml", environ={}).corpus.sources[0].pairs_per_set == 3
    mixed = BASE + "corpus: {sources: [{kind: bundled}, {kind: labelled_pairs}], references_per_language: 3}\n"
    (tmp_path / "mixed.yaml").write_text(mixed)
    assert manifest.load(tmp_path / "mixed.yaml", environ={}).corpus.references_per_language == 3  # for the references


@pytest.mark.parametrize("samples,ok", [(1, False), (3, True)])
def test_a_sampled_composite_needs_a_judge_asked_more_than_once(tmp_path, samples, ok):
    judge = {**simulated("base"), "samples": samples}
    path = write_manifest(tmp_path, [judge], composites=[{"kind": "sampled", "name": "maj", "of": "base"}])
    if ok:
        manifest.check(manifest.load(path), {})
        return
    with pytest.raises(ManifestError) as e:
        manifest.check(manifest.load(path), {})
    assert e.value.path == "composites[0].of" and "samples: 2 or more" in str(e.value)

# Tasks for developers. `pip install rust-just` provides `just`; the README's two commands
# do not need it.

venv := ".venv"
py := venv + "/bin/python"

setup:
    python3 -m venv {{venv}}
    {{venv}}/bin/pip install -q -e '.[dev]'

test: setup
    {{py}} -m pytest

demo: setup
    {{venv}}/bin/babelrun audit examples/quickstart.yaml

bench: setup
    for f in bench/*.py; do {{py}} "$f"; done

lint: setup
    {{venv}}/bin/ruff check babelrun tests bench

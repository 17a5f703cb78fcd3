"""``python -m babelrun.testing [--port P] [--latency S] [--rate-429 P] ...`` (see ``_cli``)."""

from ._cli import main

if __name__ == "__main__":
    main()

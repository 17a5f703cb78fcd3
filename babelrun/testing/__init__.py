"""A loopback OpenAI-compatible judge server that injects faults, for tests and benchmarks.

It answers ``POST /v1/chat/completions`` like a deterministic judge: it reads the two
answers out of the prompt and names the one whose content hash is smaller, so it is
consistent across orders and across runs. Latency, a required key, a script of faults, random
faults at set rates and a requests-per-minute limit are settable; every random choice comes
from one seeded ``random.Random``, so a seed gives the same outcomes again. It listens on
127.0.0.1 only.

    with FakeJudgeServer(latency_s=0.05, api_key="k", rate_429=0.05, seed=1) as server:
        ... endpoint: server.url ...
        print(server.snapshot())

From a shell (benchmarks run it in its own process; it prints its URL, then serves until
SIGTERM or Ctrl-C)::

    python -m babelrun.testing --port 8765 --rate-429 0.05 --rpm-limit 600

Every public name is importable from here; behind them, each part is a private module: the fake
judge's verdicts (``_judge``), the faults and latencies (``_faults``), the providers' wire
formats (``_wire``), the server (``_server``) and the command line (``_cli``).
"""

from ._cli import main
from ._faults import ESCAPES, FAULT_KINDS, HOSTILE, LATENCY_DISTRIBUTIONS, sample_latency
from ._judge import SOFT, choose, flipped
from ._server import FakeJudgeServer
from ._wire import ROUTES, WIRE_FORMATS, AnthropicWire, GeminiWire, OpenAIWire, WireFormat

__all__ = [
    "ESCAPES", "FAULT_KINDS", "HOSTILE", "LATENCY_DISTRIBUTIONS", "ROUTES", "SOFT", "WIRE_FORMATS",
    "AnthropicWire", "FakeJudgeServer", "GeminiWire", "OpenAIWire", "WireFormat",
    "choose", "flipped", "main", "sample_latency",
]

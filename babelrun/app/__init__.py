"""What users run: the audit (``audit``: phases, merge, one finish from log to cards and
report), the Ray executor (``cluster``), the throughput bench (``benchjudge``) and the CLI
(``cli``). The top layer: nothing in babelrun imports from here except ``babelrun/__init__``."""

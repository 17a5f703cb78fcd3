"""What users run: the audit (``audit``: plan, judge, finish; merge), built from its steps —
the run files (``runfiles``), one shard's judging (``judging``), scoring and warnings
(``scoring``), the result (``outcome``), memory hand-back (``memory``) — the Ray executor
(``cluster``, ``replicas``), the throughput bench (``benchjudge``) and the CLI (``cli``). The
top layer: nothing in babelrun imports from here except ``babelrun/__init__``."""

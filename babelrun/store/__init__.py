"""The run directory and what is kept in it: its owner (``rundir.RunDir``: paths, run info,
plan summary, stats, lock), the append-only verdict log and its done-set and locks (``log``),
the stats file (``stats``), the Parquet compaction (``compact``) and whole-file atomic writes
(``files``)."""

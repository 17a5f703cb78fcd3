"""The run directory and what is kept in it: the append-only verdict log and its done-set and
locks (``log``), the Parquet compaction (``compact``), the run's descriptive files
(``rundir``) and whole-file atomic writes (``files``)."""

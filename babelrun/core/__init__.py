"""Values and identities every stage shares, with no I/O: keys (``keys``), items and the
references they come from (``items``), log records (``records``), languages (``languages``).

Importing ``babelrun.core`` imports nothing else; each module is imported on its own.
"""

"""Analyses of finished runs, each over the records of one or more run directories:
``calibrate`` (CBC position calibration), ``invariance`` (the language-switch protocol on
parallel items, and ``judge_ls`` on labelled pairs in several conditions), ``agree`` (Cohen's
kappa against human labels), ``selfpref`` (self-preference), ``drift`` (``babelrun diff``).
``registry.ANALYSES`` lists those that write a result into the run directory: the command
line, the report and its staleness check iterate it."""

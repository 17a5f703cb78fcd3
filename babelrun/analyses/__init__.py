"""Analyses of finished runs, each over the records of one or more run directories:
``calibrate`` (CBC position calibration), ``invariance`` (the language-switch protocol on
parallel items), ``agree`` (Cohen's kappa against human labels), ``drift`` (``babelrun diff``)."""

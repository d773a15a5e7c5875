"""What a run says about its release.

* :mod:`privsynth.report.dp_report`: the DP report (public): the synthetic table against the release's
  own noisy measurements, post-processing only;
* :mod:`privsynth.report.internal_audit`: the INTERNAL audit (opt-in, not DP): the synthetic table
  against the real one, kept out of Prefect;
* :mod:`privsynth.report.forecast`: the expected error of a run from public facts, before any charge.
"""

"""What a run says about its release.

* :mod:`privsynth.report.dp_report`: the DP report (public): the synthetic table against the release's
  own noisy measurements, post-processing only;
* :mod:`privsynth.report.uncertainty`: its accuracy statement (public): a 95% TV bound per column and
  pair where a measurement supports it (AIM, section 5), else "not measured";
* :mod:`privsynth.report.figures`, :mod:`privsynth.report.html`: its pictures and the self-contained report.html;
* :mod:`privsynth.report.internal_audit`, :mod:`privsynth.report.audit_quality`: the INTERNAL audit
  (opt-in, not DP): the synthetic table against the real one, quality scores, the check of the public
  bounds; kept out of Prefect;
* :mod:`privsynth.report.forecast`: the expected error of a run from public facts, before any charge.
"""

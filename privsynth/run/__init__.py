"""One run, stage by stage.

* :mod:`privsynth.run.parameters`: the run's parameters (the CLI's options, the Prefect UI's form);
* :mod:`privsynth.run.plan`: every parameter checked and planned before data or budget is touched;
* :mod:`privsynth.run.prepare`: the budget pre-check, the run folder, the ledger and the store;
* :mod:`privsynth.run.stages`: the stage functions and the one orchestration every caller uses;
* :mod:`privsynth.run.charge`: charge, claim the draw, draw, store (docs/design.md section 5);
* :mod:`privsynth.run.context`, :mod:`privsynth.run.faults`, :mod:`privsynth.run.runfolder`,
  :mod:`privsynth.run.releases` (the release store).
"""

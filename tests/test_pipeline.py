"""The stage functions' wiring of run parameters into mechanism configs."""

import pytest
from pydantic import ValidationError

from privsynth.mechanisms import get_mechanism
from privsynth.pipeline import mechanism_config


def test_rows_set_k_only_where_the_guarantee_caps_rows():
    rap = mechanism_config(get_mechanism("rap"), 1.0, 1e-9, 500, {})
    assert rap.k == 3  # RAP's k is the marginal order; --rows is post-processing for it
    sampling = mechanism_config(get_mechanism("private_sampling"), 3.0, 1e-9, 1, {})
    assert sampling.k == 1


def test_options_override_and_are_validated():
    config = mechanism_config(get_mechanism("reduced_space"), 2.0, 1e-9, None, {"workload": "1way+2way"})
    assert config.epsilon == 2.0 and config.workload == "1way+2way"
    with pytest.raises(ValidationError, match="workload"):
        mechanism_config(get_mechanism("reduced_space"), 2.0, 1e-9, None, {"workload": "9way"})
    with pytest.raises(ValidationError):
        mechanism_config(get_mechanism("rap"), 1.0, 1e-9, None, {"no_such_option": 1})

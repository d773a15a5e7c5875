"""The flow's parameter form (what the Prefect UI shows) and the deployment file."""

from pathlib import Path

import yaml

from privsynth.config import RunParameters

ROOT = Path(__file__).resolve().parents[1]


def test_ui_form_is_the_run_parameters_model():
    from prefect.utilities.callables import parameter_schema

    from flows.synthesize import synthesize

    schema = parameter_schema(synthesize.fn).model_dump()
    assert "parameters" in schema["properties"]
    definition = next(d for name, d in schema["definitions"].items() if name == "RunParameters")
    for field in ("input", "schema_file", "mechanism", "epsilon", "delta", "rows", "seed", "output", "sink"):
        assert field in definition["properties"], field
    assert definition["properties"]["epsilon"]["exclusiveMinimum"] == 0


def test_deployments_point_at_the_flow_with_valid_parameters():
    spec = yaml.safe_load((ROOT / "deployments" / "prefect.yaml").read_text())
    assert spec["prefect-version"] == "3.8.8"
    for deployment in spec["deployments"]:
        path, _, name = deployment["entrypoint"].partition(":")
        assert (ROOT / path).is_file() and name == "synthesize"
        RunParameters(**deployment["parameters"]["parameters"])  # the form's values validate
    assert any(d.get("schedules") for d in spec["deployments"])

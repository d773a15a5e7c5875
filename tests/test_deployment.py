"""The flow's parameter form (what the Prefect UI shows) and the deployment file."""

from pathlib import Path

import yaml

from privsynth.run.parameters import RunParameters

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


def test_deployment_file_needs_no_environment_variable():
    """The worker's pull step gets the install folder from `prefect deploy` itself, not from a variable."""
    text = (ROOT / "deployments" / "prefect.yaml").read_text()
    assert "{{ $" not in text  # an environment-variable template, resolved on the worker at run time
    spec = yaml.safe_load(text)
    (step,) = spec["pull"]
    directory = step["prefect.deployments.steps.set_working_directory"]["directory"]
    build_ids = [s["prefect.deployments.steps.run_shell_script"]["id"] for s in spec["build"]]
    assert directory == "{{ install-location.stdout }}" and build_ids == ["install-location"]
    for deployment in spec["deployments"]:
        env = deployment["work_pool"]["job_variables"]["env"]
        assert env["DO_NOT_TRACK"] == "1" and env["GX_ANALYTICS_ENABLED"] == "false"


def test_served_deployment_has_its_own_name():
    from flows.serve import SERVED_NAME

    spec = yaml.safe_load((ROOT / "deployments" / "prefect.yaml").read_text())
    assert SERVED_NAME not in {d["name"] for d in spec["deployments"]}


def test_flow_annotations_are_real_classes():
    """Served runs ship the flow by value; a postponed (string) annotation leaves the parameter model undefined."""
    import inspect

    from flows.synthesize import synthesize

    assert inspect.signature(synthesize.fn).parameters["parameters"].annotation is RunParameters


def test_form_descriptions_survive_the_ui_markdown():
    """The UI renders field descriptions as Markdown: a bare <word> is taken for an HTML tag and vanishes."""
    import re

    for name, field in RunParameters.model_fields.items():
        outside_code = re.sub(r"`[^`]*`", "", field.description or "")
        assert not re.search(r"<[A-Za-z][^>]*>", outside_code), name

"""The commands the docs show run as shown (fast ones in-process; `privsynth run` is covered by the
API and flow tests), and the docs name only mechanisms that exist."""

from __future__ import annotations

import re
import shlex

import pytest
from conftest import REPO


def shell_commands(markdown: str) -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", markdown, flags=re.S)
    lines = [line.split("  #")[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line.startswith("privsynth ")]


def test_the_budget_page_commands_run_as_shown(capsys):
    from privsynth.cli import main

    commands = shell_commands((REPO / "docs" / "budgets.md").read_text())
    assert len(commands) == 6
    for command in commands:
        assert main(shlex.split(command)[1:]) == 0, command
    out = capsys.readouterr().out
    assert "ledger:" in out and "census" in out and "pure" in out


def test_lowering_a_budget_below_what_is_spent_is_one_clear_line(capsys, tmp_path):
    from privsynth.cli import main
    from privsynth.privacy.accounting import PrivacyCost
    from privsynth.privacy.ledger import BudgetLedger

    BudgetLedger().charge("adult", "k", PrivacyCost.pure(1.0, "test"), require_budget=False)
    assert main(["budget", "set", "adult", "--epsilon", "0.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("privsynth: error:") and "\n" not in err and "never lowered" in err


@pytest.mark.parametrize("page", ["mechanisms.md", "api.md", "budgets.md", "schema.md", "warehouse.md",
                                  "deployments.md"])
def test_docs_name_only_registered_mechanisms(page):
    from privsynth.mechanisms import MECHANISM_MODULES

    text = (REPO / "docs" / page).read_text()
    named = set(re.findall(r"`(aim|rap|reduced_space|microaggregation|private_sampling|mst)`", text))
    assert named <= set(MECHANISM_MODULES), named


def test_every_documented_run_command_parses_and_names_only_real_options():
    """The `privsynth run` lines of the docs and the README parse with the real CLI (no data is read)."""
    from privsynth.cli import build_parser

    parser = build_parser()
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    checked = 0
    for page in pages:
        text = re.sub(r"\\\n\s*", " ", page.read_text())  # join continued lines
        blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
        for line in (line.split("  #")[0].strip() for block in blocks for line in block.splitlines()):
            words = shlex.split(line) if "privsynth run" in line else []
            while words and "=" in words[0] and not words[0].startswith("-"):
                words = words[1:]  # leading VAR=value assignments
            if len(words) < 2 or words[0] not in ("privsynth", ".venv/bin/privsynth") or words[1] != "run" \
                    or "..." in words:
                continue
            parser.parse_args(words[1:])
            checked += 1
    assert checked >= 4


# ---------------------------------------------------------------- issue 41.5: the numbers the docs state

def _flat(path) -> str:
    return " ".join((REPO / path).read_text().split())


def test_the_readme_states_the_default_runs_defaults_as_the_code_has_them():
    from privsynth.mechanisms import DEFAULT_MECHANISM
    from privsynth.privacy.accounting import DEFAULT_DELTA
    from privsynth.run.discover import MAX_SHARE, MIN_SHARE, SHARE_PER_COLUMN
    from privsynth.run.fine_decoding import DEFAULT_SHARE, DISCOVERED_BINS_SHARE
    from privsynth.run.parameters import RunParameters

    readme = _flat("README.md")
    fields = RunParameters.model_fields
    stated = re.search(r"\[--epsilon ([\d.e-]+)\] \[--delta ([\d.e-]+)\]", readme)
    assert float(stated.group(1)) == fields["epsilon"].default and float(stated.group(2)) == DEFAULT_DELTA
    assert fields["fine_decoding"].default is None  # the share follows the schema: fine_decoding.default_share
    assert f"`--fine-decoding SHARE` (default {DEFAULT_SHARE:g}; {DISCOVERED_BINS_SHARE:g} where discovery" in readme
    assert (f"(default {SHARE_PER_COLUMN:.0%} per column read, at least {MIN_SHARE:.0%}, at most {MAX_SHARE:.0%})"
            in readme)
    assert f"| `{DEFAULT_MECHANISM}` (default) |" in readme
    assert f"epsilon {fields['epsilon'].default:g}, and writes `runs/<run-id>/`" in readme


def test_the_readme_states_how_long_the_default_test_run_takes(request):
    """The figure, and (once the README's test command has run here: conftest records it) the measured time
    within a factor of two of it."""
    from conftest import DURATION_RECORD

    stated = re.search(r"The default run is (?:about )?([\d,]+) tests; expect about (\d+) minutes", _flat("README.md"))
    assert stated, "README.md states no duration for the default test run"
    measured = request.config.cache.get(DURATION_RECORD, None)
    if measured is not None:
        assert int(stated.group(2)) / 2 <= measured / 60 <= 2 * int(stated.group(2)), (measured, stated.group(0))


def test_the_deployments_doc_names_the_ledger_and_store_the_worker_uses(tmp_path, monkeypatch):
    """A worker's runs use the per-user ledger and release store (privsynth.io.home), never `runs/ledger.sqlite`."""
    from privsynth.io.home import default_ledger_path, default_release_store
    from privsynth.privacy.ledger import default_ledger_url

    page = _flat("docs/deployments.md")
    assert "runs/ledger.sqlite" not in page and "runs/releases" not in page
    monkeypatch.setenv("PRIVSYNTH_HOME", str(tmp_path))
    assert "`$PRIVSYNTH_HOME/ledger.sqlite`" in page and default_ledger_path() == tmp_path / "ledger.sqlite"
    assert "`$PRIVSYNTH_HOME/releases/`" in page and default_release_store() == tmp_path / "releases"
    assert default_ledger_url() == f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    monkeypatch.delenv("PRIVSYNTH_HOME")
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert "by default `~/.local/share/privsynth`" in page
    assert default_ledger_path() == tmp_path / "user" / ".local" / "share" / "privsynth" / "ledger.sqlite"


def test_prefect_yaml_says_what_its_deployments_run():
    """Each deployment's parameters are RunParameters; "the default mechanism" is the default mechanism."""
    import yaml

    from privsynth.mechanisms import DEFAULT_MECHANISM
    from privsynth.run.parameters import RunParameters

    spec = yaml.safe_load((REPO / "deployments" / "prefect.yaml").read_text())
    for deployment in spec["deployments"]:
        parameters = RunParameters(**deployment["parameters"]["parameters"])
        if "default mechanism" in deployment.get("description", ""):
            assert parameters.mechanism == DEFAULT_MECHANISM, deployment["name"]
            assert f"default mechanism ({DEFAULT_MECHANISM})" in deployment["description"]


def test_readme_and_deployments_doc_agree_the_bundled_example_needs_no_budget(tmp_path):
    """Both say so, and the code does it: the bundled Adult run is accepted with no budget, without --unlimited."""
    from privsynth.privacy.ledger import BudgetLedger
    from privsynth.run.parameters import parse_parameters
    from privsynth.run.plan import plan_run
    from privsynth.run.prepare import precheck_budget

    assert "The bundled example is public data and needs no budget" in _flat("README.md")
    page = _flat("docs/deployments.md")
    assert "The bundled Adult table is public data: as in the README, it needs no budget" in page
    assert "set one first" not in page and "set one first" not in (REPO / "deployments" / "prefect.yaml").read_text()
    plan = plan_run(parse_parameters({}))
    line = precheck_budget(BudgetLedger(f"sqlite:///{tmp_path / 'l.sqlite'}"), plan.dataset, plan.cost,
                           unlimited=plan.unlimited, seeded=False, allow_seed_with_budget=False,
                           public_example=plan.bundled_example)
    assert "needs no budget" in line


def test_the_yaml_the_docs_show_parses_as_what_it_claims(tmp_path):
    """Every YAML block of the docs loads; a schema block is a valid schema; a dbt schema.yml block is read as a
    contract (with its one elided model dropped)."""
    import yaml

    from privsynth.schema import parse_schema

    checked = 0
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for block in re.findall(r"```yaml\n(.*?)```", page.read_text(), flags=re.S):
            document = yaml.safe_load(block)
            if isinstance(document, dict) and "columns" in document and "name" in document:
                parse_schema(document)
            elif isinstance(document, dict) and "models" in document:
                models = [m for m in document["models"] if m.get("columns") != ["..."]]
                assert models and all(m["columns"] for m in models)
            checked += 1
    assert checked >= 2


def test_the_readme_python_example_runs_as_shown(tmp_path, monkeypatch):
    """README's "From Python": the calls it shows, with their names and arguments (a smaller epsilon is not used:
    the example runs exactly; the folder is a temporary one)."""
    block = re.search(r"## From Python\n\n```python\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S).group(1)
    monkeypatch.chdir(REPO)
    namespace: dict = {}
    code = block.replace('privsynth.synthesize("privsynth/data/adult.csv.gz", schema, epsilon=1.0)',
                         f'privsynth.synthesize("privsynth/data/adult.csv.gz", schema, epsilon=1.0, '
                         f'output={str(tmp_path / "run")!r})')
    assert code != block  # the call the README shows is the one run
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - the README's own example
    release = namespace["release"]
    assert release.epsilon == pytest.approx(1.0) and release.privacy["spent"]["epsilon"] == pytest.approx(1.0)


def test_the_budget_page_states_what_one_more_run_may_spend_as_the_ledger_computes_it():
    """docs/budgets.md's example (a budget of 3 with 2.8 spent): the figure it states is the ledger's."""
    from privsynth.privacy.accounting import DEFAULT_DELTA, PrivacyCost
    from privsynth.privacy.spending import next_run_epsilon, rho_allowance

    number = r"(\d+(?:\.\d+)?)"
    stated = re.search(rf"on a budget of {number} with {number} spent, one more run may still spend about {number}, "
                       rf"not {number}", _flat("docs/budgets.md"))
    budget, spent, most, naive = (float(g) for g in stated.groups())
    computed = next_run_epsilon([PrivacyCost.zcdp(rho_allowance(spent, DEFAULT_DELTA), "spent")], budget, DEFAULT_DELTA)
    assert round(computed, 2) == most and naive == pytest.approx(budget - spent)

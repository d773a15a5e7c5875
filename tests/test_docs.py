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
    from flows.cli import main

    commands = shell_commands((REPO / "docs" / "budgets.md").read_text())
    assert len(commands) == 5
    for command in commands:
        assert main(shlex.split(command)[1:]) == 0, command
    out = capsys.readouterr().out
    assert "ledger:" in out and "census" in out and "pure" in out


def test_lowering_a_budget_below_what_is_spent_is_one_clear_line(capsys, tmp_path):
    from flows.cli import main
    from privsynth.privacy.accounting import PrivacyCost
    from privsynth.privacy.ledger import BudgetLedger

    BudgetLedger().charge("adult", "k", PrivacyCost.pure(1.0, "test"), require_budget=False)
    assert main(["budget", "set", "adult", "--epsilon", "0.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("privsynth: error:") and "\n" not in err and "never lowered" in err


@pytest.mark.parametrize("page", ["mechanisms.md", "api.md", "budgets.md", "schema.md", "warehouse.md", "deployments.md"])
def test_docs_name_only_registered_mechanisms(page):
    from privsynth.mechanisms import MECHANISM_MODULES

    text = (REPO / "docs" / page).read_text()
    named = set(re.findall(r"`(aim|rap|reduced_space|microaggregation|private_sampling|mst)`", text))
    assert named <= set(MECHANISM_MODULES), named


def test_every_documented_run_command_parses_and_names_only_real_options():
    """The `privsynth run` lines of the docs and the README parse with the real CLI (no data is read)."""
    from flows.cli import build_parser

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

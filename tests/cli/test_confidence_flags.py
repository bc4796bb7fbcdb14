"""``plan --confidence`` / ``--size-for-confidence``: what the model-error check accepts and refuses before any
work is done."""

from typer.testing import CliRunner

from hetplan.cli.main import app
from tests.conftest import EXAMPLES
from tests.helpers import cli

runner = CliRunner()
EXAMPLE = EXAMPLES / "llama3-70b-azure-conv.yaml"


def invoke(*args):
    return runner.invoke(app, cli(args), env={"COLUMNS": "120", "NO_COLOR": "1"})


def test_an_unknown_confidence_is_refused_naming_the_values():
    res = invoke("plan", EXAMPLE, "--confidence", "p85")
    assert res.exit_code == 2, res.output
    assert "p50, p80, p90" in res.output and "Traceback" not in res.output


def test_sizing_for_confidence_needs_the_verification_and_a_confidence():
    res = invoke("plan", EXAMPLE, "--no-verify", "--size-for-confidence")
    assert res.exit_code == 2 and "--size-for-confidence needs the verification" in res.output
    res = invoke("plan", EXAMPLE, "--confidence", "none", "--size-for-confidence")
    assert res.exit_code == 2 and "needs a --confidence" in res.output

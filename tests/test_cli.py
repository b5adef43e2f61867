"""The `mmbu` command mounts every stage and answers --help everywhere."""
import subprocess
import sys

import pytest
from click.testing import CliRunner

from mmbu.cli import SUBCOMMANDS, cli


def test_help_lists_every_stage():
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in SUBCOMMANDS:
        assert name in result.output


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_every_subcommand_has_help(name):
    result = CliRunner().invoke(cli, [name, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def test_unknown_command_is_usage_error():
    result = subprocess.run([sys.executable, "-m", "mmbu", "no-such-stage"], capture_output=True, text=True)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_version_is_the_installed_package_version_and_is_looked_up_only_when_asked():
    from importlib.metadata import version

    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0 and result.output == f"mmbu, version {version('mmbu')}\n"
    probe = "import sys, mmbu.cli; print('importlib.metadata' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip() == "False"

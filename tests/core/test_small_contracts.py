"""The small shared pieces: Retry-After, boxes and IoU, exclusions, the version, the command-line floor."""
from __future__ import annotations

import sys
from email.utils import format_datetime
from datetime import UTC, datetime

import click
import pytest
from click.testing import CliRunner

from mmbu.core.boxes import box_text, iou
from mmbu.core.cli import ExitCode, InvalidInput, LazyGroup
from mmbu.core.exclusions import EXCLUSION_COLUMNS, Exclusion
from mmbu.core.retry_after import retry_after_seconds
from mmbu.core.version import toolkit_version


@pytest.mark.parametrize("value, seconds", [("120", 120.0), (" 2.5 ", 2.5), ("-3", 0.0), ("soon", None), ("", None),
                                            (None, None)])
def test_retry_after_as_delta_seconds(value, seconds):
    assert retry_after_seconds(value) == seconds


def test_retry_after_as_an_http_date():
    now = 1_750_000_000.0
    date = format_datetime(datetime.fromtimestamp(now + 30, UTC), usegmt=True)
    assert retry_after_seconds(date, now=now) == pytest.approx(30)
    assert retry_after_seconds(format_datetime(datetime.fromtimestamp(now - 30, UTC), usegmt=True), now=now) == 0.0


def test_iou_by_hand_and_the_release_spelling_of_a_box():
    assert iou((0, 0, 10, 10), (5, 0, 15, 10)) == pytest.approx(50 / 150)
    assert iou((0, 0, 10, 10), (10, 0, 20, 10)) == 0.0  # touching edges share no pixel
    assert iou((0, 0, 0, 10), (0, 0, 0, 10)) == 0.0  # empty boxes
    assert box_text((10.4, 20.5, 30.6, 40)) == "[10, 20, 31, 40]"


def test_exclusion_columns_are_the_model_fields_in_order():
    assert EXCLUSION_COLUMNS == tuple(Exclusion.model_fields)
    assert Exclusion(dataset_id="d", item="x.png", stage="convert", reason="truncated").sample_id is None


def test_toolkit_version_is_the_installed_one():
    from importlib.metadata import version

    assert toolkit_version() == version("mmbu")


def test_lazy_group_lists_commands_without_importing_them_and_imports_one_when_used(tmp_path, monkeypatch):
    (tmp_path / "lazy_probe_commands.py").write_text(
        "import click\n\n@click.command()\ndef hello():\n    click.echo('hello from the module')\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    table = {"hello": ("lazy_probe_commands:hello", "Say hello."), "broken": ("no_such_module_here:x", "Never used.")}

    @click.group(cls=LazyGroup, lazy_commands=table)
    def group() -> None:
        """A group."""

    runner = CliRunner()
    listing = runner.invoke(group, ["--help"])
    assert listing.exit_code == 0 and "Say hello." in listing.output and "Never used." in listing.output
    assert "lazy_probe_commands" not in sys.modules
    assert runner.invoke(group, ["hello"]).output == "hello from the module\n"
    assert runner.invoke(group, ["nothing"]).exit_code == ExitCode.INVALID_INPUT  # click's usage error


def test_invalid_input_exits_2_with_one_sentence_and_no_traceback():
    @click.command()
    def command() -> None:
        raise InvalidInput("manifests/x.yaml: field license: 'other' is not a licence")

    result = CliRunner().invoke(command)
    assert result.exit_code == 2
    assert result.output == "Error: manifests/x.yaml: field license: 'other' is not a licence\n"
    assert "Traceback" not in result.output

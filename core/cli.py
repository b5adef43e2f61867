"""What every stage's command line shares: the exit codes (docs/architecture.md §3.1), the exit-2 exception and a
command group that imports its sub-commands only when one is used."""
from __future__ import annotations

import errno
import importlib
from collections.abc import Mapping
from enum import IntEnum
from typing import Any

import click


class ExitCode(IntEnum):
    """The exit status of every `mmbu` command."""

    OK = 0  # all good
    ITEMS_FAILED = 1  # the job ran but some items failed; each failure is in its report
    INVALID_INPUT = 2  # bad usage or invalid input; the message names the argument, file or field


class InvalidInput(click.ClickException):
    """An unusable argument, file or field: exit 2 with one sentence naming it, no traceback."""

    exit_code = ExitCode.INVALID_INPUT


# Faults of the machine, not of the toolkit (docs/architecture.md §3.1: exit 2, one sentence naming the path). Atomic
# writes leave nothing half-written that a re-run would trust, so the same command resumes once they are fixed.
_FULL = "free some space and run the command again: it resumes where it stopped"
_NOT_WRITABLE = "choose a writable folder or fix its permissions"
_IN_THE_WAY = "point the command at a folder, or move the file away"
DISK_FAULTS: dict[int, tuple[str, str]] = {
    errno.ENOSPC: ("the disk is full", _FULL), errno.EDQUOT: ("the disk quota is exceeded", _FULL),
    errno.EFBIG: ("the file size limit is reached", _FULL),
    errno.EROFS: ("the file system is read-only", _NOT_WRITABLE), errno.EACCES: ("permission denied", _NOT_WRITABLE),
    errno.EPERM: ("the operation is not permitted", _NOT_WRITABLE),
    errno.EEXIST: ("a file is where a folder is needed", _IN_THE_WAY),
    errno.ENOTDIR: ("a file is where a folder is needed", _IN_THE_WAY),
    errno.EISDIR: ("a folder is where a file is needed", "move the folder away"),
}


def describe_disk_fault(error: OSError) -> str | None:
    """One sentence for an OSError that a user fixes on their machine (space, permissions, a path), else None."""
    if error.errno not in DISK_FAULTS:
        return None
    cause, advice = DISK_FAULTS[error.errno]
    return f"cannot write {error.filename or 'a file'}: {cause} ({error.strerror}); {advice}"


class LazyGroup(click.Group):
    """A click group whose commands are imported on first use, so `--help` stays fast and a broken
    optional stack (a missing GPU library) cannot take down unrelated commands.

    `lazy_commands` maps a command name to `("module:attribute", "one-line help")`; the help text
    lives in the table so that listing the commands imports none of them.

        @click.group(cls=LazyGroup, lazy_commands={"run": ("mmbu.benchmark_eval.runner.cli:run", "Ask a model.")})
    """

    def __init__(self, *args: Any, lazy_commands: Mapping[str, tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.lazy_commands)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.lazy_commands:
            return None
        module_name, attribute = self.lazy_commands[name][0].split(":")
        return getattr(importlib.import_module(module_name), attribute)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, text) for name, (_, text) in self.lazy_commands.items()])

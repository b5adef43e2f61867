"""Ctrl-C and SIGTERM for every `mmbu` command: say what was done and how to resume, exit 130 or 143.

Both signals surface as a `KeyboardInterrupt` where the process is (SIGTERM as its subclass `Terminated`), so the
cleanup a command already does for Ctrl-C (the `finally` blocks that flush records and remove temporaries) runs for
SIGTERM too. A command registers what it has done so far with `on_interrupt(describe)`; the `mmbu` entry point
catches the interrupt, prints that and the command that resumes (its own command line, secrets masked), and exits
with the shell's codes: 128 + the signal number (130 for SIGINT, 143 for SIGTERM), distinct from 1 "some items
failed" (docs/architecture.md §3.1).
"""
from __future__ import annotations

import os
import shlex
import signal
import sys
from collections.abc import Callable, Sequence
from types import FrameType

from mmbu.core.secrets import redact_argv

INTERRUPTED_BY_CTRL_C = 128 + signal.SIGINT  # 130
TERMINATED = 128 + signal.SIGTERM  # 143


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the main thread is, so that every Ctrl-C cleanup path also runs for it."""


_describe: Callable[[], str] | None = None


def on_interrupt(describe: Callable[[], str] | None) -> None:
    """What an interrupt of the running command should report: `describe()` returns the counts so far and what was
    saved (one or a few lines). The latest registration wins; it is never unregistered on the way out, since the
    interrupt unwinds the command before the entry point reports it."""
    global _describe
    _describe = describe


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated()


def _worker_signals_in_child() -> None:
    # A forked worker must die of SIGTERM (a pool's terminate), not raise in the middle of its work; and it leaves
    # Ctrl-C (which the terminal sends to the whole group) to its parent, which stops it: a KeyboardInterrupt in a
    # pool worker would print a traceback from wherever it happened to be.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


_installed = False


def install_signal_handlers() -> None:
    """SIGTERM raises `Terminated` in this (main) thread; forked children (the build's workers) die of SIGTERM and
    ignore Ctrl-C, which their parent handles by stopping them."""
    global _installed
    if _installed:
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    os.register_at_fork(after_in_child=_worker_signals_in_child)
    _installed = True


def resume_command(argv: Sequence[str] | None = None) -> str:
    """The command as typed (`mmbu` and its arguments), with secret values masked, quoted for a shell."""
    args = list(sys.argv[1:] if argv is None else argv)
    return shlex.join(["mmbu", *redact_argv(args)])


def exit_code_for(interrupt: BaseException) -> int:
    return TERMINATED if isinstance(interrupt, Terminated) else INTERRUPTED_BY_CTRL_C


def interrupted_message(interrupt: BaseException, argv: Sequence[str] | None = None) -> str:
    """What the entry point prints: which signal, what the command had done, and the command that resumes."""
    what = "terminated (SIGTERM)" if isinstance(interrupt, Terminated) else "interrupted (Ctrl-C)"
    lines = [f"mmbu: {what}."]
    if _describe is not None:
        try:
            lines.append(_describe())
        except Exception as exc:  # noqa: BLE001 - the report of an interrupt must not fail in turn
            lines.append(f"(the counts could not be read: {exc})")
    lines.append("Nothing half-written is kept; to resume, run the same command again:")
    lines.append(f"  {resume_command(argv)}")
    return "\n".join(lines)

"""Defence in depth for code that parses hostile files: a child process that can read only the folders it is given.

The checks in `core.confinement` keep every name a manifest, a host or a file gives inside its dataset's folder.
A parser gap (a header spelling nobody thought of, a library following a link of its own) would still let one
file of the machine be read and published. On Linux the kernel's Landlock (5.13+) closes that: `run_confined`
forks a child, restricts it to reading the given folders plus what Python and its libraries need (the
interpreter's prefixes, `sys.path`, `/usr`, `/lib*`, a few files of `/etc` and `/dev`, `/proc`), runs the function
there and hands its (pickled) result back. Writes are not restricted (only reading rights are handled), so the
child writes its outputs as before; a file it writes must be in a readable folder only when it opens it for
reading too.

Bound to the kernel directly with ctypes (three system calls and `prctl`): no Python binding on PyPI was
maintained enough to depend on (the `landlock` package is a 1.0.0.dev pre-release). Where the kernel has no
Landlock (older kernels, not Linux, a container that filters the calls), `landlock_abi()` is 0 and the function
runs unconfined in this process: the lexical and link checks still hold.
"""
from __future__ import annotations

import ctypes
import os
import pickle
import platform
import signal
import sys
import tempfile
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

# <linux/landlock.h>; system call numbers are the same on x86_64 and aarch64 (the generic table)
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_ACCESS_FS_READ_FILE, _ACCESS_FS_READ_DIR = 1 << 2, 1 << 3
_HANDLED = _ACCESS_FS_READ_FILE | _ACCESS_FS_READ_DIR
_PR_SET_NO_NEW_PRIVS, _PR_SET_PDEATHSIG = 38, 1

# What the interpreter and its libraries read after the restriction (lazy imports, dlopen, locale, CPU counts)
SYSTEM_READABLE = ("/usr", "/lib", "/lib64", "/lib32", "/opt", "/proc", "/sys/devices/system/cpu",
                   "/sys/fs/cgroup", "/etc/ld.so.cache", "/etc/localtime", "/etc/nsswitch.conf", "/etc/passwd",
                   "/etc/group", "/etc/ssl", "/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/dev/shm")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class ConfinedChildDied(RuntimeError):
    """The confined child ended without handing back a result (killed, out of memory, a crash in a decoder)."""


@cache
def _libc() -> ctypes.CDLL | None:
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


@cache
def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock cannot be used here."""
    libc = _libc()
    if libc is None:
        return 0
    version = libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(int(version), 0)


def python_readable() -> list[Path]:
    """Folders the interpreter reads modules, data and libraries from."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    # sys.path entries under the prefixes only: '' or a script's folder would open the working folder
    roots = prefixes | {entry for entry in sys.path if entry and any(
        os.path.realpath(entry).startswith(os.path.realpath(prefix) + os.sep) for prefix in prefixes)}
    package = sys.modules.get("mmbu")
    for module in list(sys.modules.values()):  # editable installs map each stage folder into `mmbu`
        name = getattr(module, "__name__", "")
        if name.startswith("mmbu.") and name.count(".") == 1 and getattr(module, "__path__", None):
            roots.update(module.__path__)
    if package is not None:
        roots.update(getattr(package, "__path__", []))
    return [Path(root) for root in roots if root and Path(root).exists()]


def restrict_reading(readable: Iterable[Path]) -> None:
    """Restrict this thread (and what it starts later) to reading files below `readable`; OSError when the
    kernel refuses. Irreversible: call it in a child process made for the purpose."""
    libc = _libc()
    if libc is None or not landlock_abi():
        raise OSError("Landlock is not available on this system")
    attr = _RulesetAttr(_HANDLED)
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
                           ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        for path in {Path(p) for p in readable}:
            try:
                descriptor = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # absent here (no /lib32, no /opt): nothing to allow
            try:
                rights = _HANDLED if os.path.isdir(path) else _ACCESS_FS_READ_FILE
                rule = _PathBeneathAttr(rights, descriptor)
                if libc.syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                                ctypes.byref(rule), ctypes.c_uint32(0)) < 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
            finally:
                os.close(descriptor)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)


def run_confined(function: Callable[[Any], T], argument: Any, readable: Iterable[Path], *,
                 scratch: Path | None = None) -> T:
    """`function(argument)` in a forked child that can read only `readable`, `python_readable()` and
    `SYSTEM_READABLE`; its result (or exception) comes back pickled. Without Landlock, `function(argument)` here.

    `scratch` becomes the child's temporary folder (TMPDIR): the system's /tmp holds other users' files and is not
    readable in the child. ConfinedChildDied when the child ends without a result (killed, out of memory)."""
    if not landlock_abi():
        return function(argument)
    allowed = [*readable, *python_readable(), *map(Path, SYSTEM_READABLE), *([scratch] if scratch else [])]
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(reader)
        _child(function, argument, allowed, scratch, writer)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        payload = pipe.read()
    _, status = os.waitpid(pid, 0)
    if not payload:
        how = (f"killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
               else f"exit code {os.waitstatus_to_exitcode(status)}")
        raise ConfinedChildDied(f"the confined process ended without a result ({how}; e.g. out of memory, or a "
                                "crash in a decoder)")
    ok, value = pickle.loads(payload)
    if ok:
        return value
    raise value


def _child(function: Callable[[Any], Any], argument: Any, allowed: list[Path], scratch: Path | None,
           writer: int) -> None:
    code = 0
    try:
        libc = _libc()
        if libc is not None:
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # dies with the worker that forked it
        if scratch is not None:
            scratch.mkdir(parents=True, exist_ok=True)
            os.environ["TMPDIR"] = str(scratch)
            tempfile.tempdir = str(scratch)
        restrict_reading(allowed)
        try:
            result: tuple[bool, Any] = (True, function(argument))
        except Exception as exc:  # noqa: BLE001 - handed back to the parent, which raises it
            result = (False, exc)
        try:
            payload = pickle.dumps(result)
        except Exception as exc:  # noqa: BLE001 - an unpicklable result or exception: say so
            payload = pickle.dumps((False, RuntimeError(f"{type(exc).__name__}: {exc}")))
        with os.fdopen(writer, "wb") as pipe:
            pipe.write(payload)
    except BaseException:  # noqa: BLE001 - Ctrl-C, a failed restriction: no result, the parent reports it
        code = 1
    finally:
        os._exit(code)

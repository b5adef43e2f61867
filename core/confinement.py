"""Keeping every path a manifest names inside the folder it belongs to.

A manifest is contributed data: its layout paths (tables, annotation files, image globs, templates) are
relative to the dataset's folder `raw/<id>/`, and a `local` source is relative to the repository. A
path that is absolute or climbs out with `..`, or a symbolic link that points elsewhere, would let a
manifest read (and publish in a release) any file the builder can read. So the rule is checked twice:

* `lexical_problem` on the text, when the manifest is validated (no file system needed);
* `confine` / `inside` after resolving symbolic links, when the build opens the file (`ResolvedFolder`
  answers the same for the thousands of files of one dataset).
"""
from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from pathlib import Path, PurePosixPath

_DRIVE = re.compile(r"^[A-Za-z]:")


class OutsideFolder(ValueError):
    """A path resolves outside the folder it must stay in; the message names the path and the folder."""


def lexical_problem(value: str, folder: str = "the dataset's folder raw/<id>/") -> str | None:
    """Why the path or glob `value` could leave `folder`, or None: absolute, `~`, a drive, `..`, a NUL."""
    text = value.replace("\\", "/")
    if "\0" in text:
        return "holds a NUL character"
    if text.startswith(("/", "~")) or _DRIVE.match(text):
        return f"is absolute; write it relative to {folder}"
    if ".." in PurePosixPath(text).parts:
        return f"climbs out with '..'; every path stays inside {folder}"
    return None


def name_problem(name: str) -> str | None:
    """Why a file name a host or a file gives (a Zenodo key, an archive member, a header's data file) cannot be
    used as a path inside a folder, or None. Backslashes count as separators (Windows-made archives and keys);
    a leading `~` is an ordinary character here, since nothing expands it."""
    text = name.replace("\\", "/")
    if "\0" in text:
        return "holds a NUL character"
    if not text.strip("/. "):
        return "names no file"
    if text.startswith("/") or _DRIVE.match(text):
        return "is an absolute path"
    if ".." in PurePosixPath(text).parts:
        return "climbs out with '..'"
    return None


def confined_name(folder: Path, name: str, *, what: str = "the file name") -> Path:
    """`folder / name` for a name a host or a file gives, checked as text (`name_problem`) and again after
    resolving symbolic links (`confine`); OutsideFolder naming `what`, the name and the folder otherwise."""
    problem = name_problem(name)
    if problem:
        raise OutsideFolder(f"{what} {name!r} {problem}; only files inside {folder} are written or read")
    return confine(folder, *PurePosixPath(name.replace("\\", "/")).parts, what=what)


def stays_inside(folder: str) -> Callable[[str], str]:
    """A pydantic validator refusing a path that `lexical_problem` says could leave `folder`."""
    def check(value: str) -> str:
        problem = lexical_problem(value, folder)
        if problem:
            raise ValueError(f"{value!r} {problem}")
        return value

    return check


def inside(folder: Path, path: Path) -> bool:
    """Whether `path`, with symbolic links resolved, lies in `folder` (also resolved)."""
    try:
        return Path(path).resolve().is_relative_to(Path(folder).resolve())
    except (OSError, RuntimeError):  # a symlink loop
        return False


def confine(folder: Path, *parts: str, what: str = "the path") -> Path:
    """`folder / parts`, or OutsideFolder when it resolves (through `..` or a link) outside `folder`."""
    path = Path(folder).joinpath(*parts)
    if not inside(folder, path):
        shown = "/".join(parts)
        raise OutsideFolder(f"{what} {shown!r} resolves outside {folder} (to {_resolved(path)}); only files inside "
                            "it are read or written")
    return path


def _resolved(path: Path) -> str:
    try:
        return str(path.resolve())
    except (OSError, RuntimeError):
        return "a symbolic link loop"


class ResolvedFolder:
    """`inside` and `Path.resolve().relative_to` for many paths checked against one folder (a dataset's files).

    `Path.resolve` looks at every component of a path (an lstat each, then a stat), which made resolving
    a tenth of a build. Here the folder is resolved once and each parent directory once; a file then
    costs one lstat of its last component: when that is not a symbolic link, resolving the path is
    resolving its parent and appending the name (what `os.path.realpath` does, component by
    component). A last component that is a link, a path holding `..` (which `realpath` applies after
    following the links before it) and a parent that cannot be resolved (a link loop) go through
    `Path.resolve` whole, so every answer, and every error, is the one `inside` and
    `Path.resolve` give. The directory cache assumes the folder's directories are not replaced by
    links while one layout reads them (the fetch wrote them and nothing else writes there).
    """

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.root = str(self.folder.resolve())
        self._prefix = self.root if self.root.endswith(os.sep) else self.root + os.sep
        self._parents: dict[str, str] = {}

    def resolve(self, path: str | os.PathLike[str]) -> str:
        """`str(Path(path).resolve())`, raising what it raises."""
        text = os.fspath(path)
        if ".." in text.split(os.sep):
            return str(Path(text).resolve())
        absolute = os.path.abspath(text)  # only drops "." and doubled separators here: no ".." is left
        parent, name = os.path.split(absolute)
        if not name:
            return str(Path(absolute).resolve())
        resolved = self._parents.get(parent)
        if resolved is None:
            try:
                resolved = self._parents[parent] = str(Path(parent).resolve())
            except (OSError, RuntimeError):  # a link loop above the file: raise what resolving it whole raises
                return str(Path(absolute).resolve())
        candidate = os.path.join(resolved, name)
        try:
            if stat.S_ISLNK(os.lstat(candidate).st_mode):
                return str(Path(absolute).resolve())
        except OSError:
            pass  # a missing file resolves to its name under the resolved parent, as with realpath
        return candidate

    def inside(self, path: str | os.PathLike[str]) -> bool:
        """`inside(folder, path)`."""
        try:
            resolved = self.resolve(path)
        except (OSError, RuntimeError):  # a symlink loop
            return False
        return resolved == self.root or resolved.startswith(self._prefix)

    def relative(self, path: str | os.PathLike[str]) -> str:
        """`Path(path).resolve().relative_to(folder.resolve()).as_posix()`; ValueError when outside."""
        resolved = self.resolve(path)
        if resolved == self.root:
            return "."
        if not resolved.startswith(self._prefix):
            raise ValueError(f"{resolved!r} is not in the subpath of {self.root!r}")
        return resolved[len(self._prefix):].replace(os.sep, "/")

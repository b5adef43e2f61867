"""Paths as users and reports see them.

`printable_path`: a file name that is not valid UTF-8 reaches Python as surrogate escapes, which no
UTF-8 writer (JSON reports, `exclusions.csv`, a terminal) accepts; its undecodable bytes are shown as
`\\xNN` instead, so the item can still be named in one sentence.
"""
from __future__ import annotations

from pathlib import Path


def printable_path(path: str | Path) -> str:
    """`path` as text that can be written anywhere (undecodable bytes as `\\xNN`)."""
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text

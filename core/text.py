"""Text that goes into one-sentence messages, reports and CSV files.

`printable_path`: a file name that is not valid UTF-8 reaches Python as surrogate escapes, which no
UTF-8 writer (JSON reports, `exclusions.csv`, a terminal) accepts; its undecodable bytes are shown as
`\\xNN` instead, so the item can still be named in one sentence.

`shorten`: a message that quotes what a user wrote must stay one readable line even when the value is
10 MB long; the start is kept and the rest counted.
"""
from __future__ import annotations

from pathlib import Path

MESSAGE_LIMIT = 400  # characters of a quoted value or a reason kept in a message


def printable_path(path: str | Path) -> str:
    """`path` as text that can be written anywhere (undecodable bytes as `\\xNN`)."""
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text


def shorten(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """`text` itself, or its first `limit` characters and how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters)"

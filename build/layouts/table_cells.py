"""What a Parquet image cell holds, as the layout's `image_encoding` says: encoded bytes (a `datasets`
`Image` struct `{bytes, path}` or a binary column), base64 text (SurgWound's `image` column), or a path
to an image file of the dataset (a struct with only its `path`, or a text column).

A path is read relative to the layout's `image_root` and must stay inside the dataset's folder: an
absolute path (a copy made on its uploader's disk), one climbing out with `..` or a link leading out is
a problem of that row, never a file read.
"""
from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mmbu.core.confinement import inside, lexical_problem

_DATA_URI = re.compile(r"^data:[\w.+-]+/[\w.+-]+;base64,", re.IGNORECASE)


class CellProblem(ValueError):
    """A cell that holds no usable image; the message is one sentence."""


def cell_image(cell: Any, column: str, encoding: str, raw_dir: Path, image_root: str) -> bytes | Path:
    """The encoded image bytes a cell holds, or the dataset file it names."""
    if encoding == "base64":
        return _base64(cell, column)
    if encoding == "path":
        text = cell.get("path") if isinstance(cell, Mapping) else cell
        return _dataset_file(text, column, raw_dir, image_root)
    if isinstance(cell, Mapping):  # the `datasets` Image feature: {"bytes": ..., "path": ...}
        if cell.get("bytes"):
            return bytes(cell["bytes"])
        if cell.get("path"):  # stored by reference: the file must be among the fetched ones
            return _dataset_file(cell["path"], column, raw_dir, image_root)
        raise CellProblem(f"the {column} cell holds neither image bytes nor a path")
    if isinstance(cell, (bytes, bytearray)) and cell:
        return bytes(cell)
    if isinstance(cell, str):
        raise CellProblem(f"the {column} cell holds text, not image bytes; set image_encoding to base64 or path "
                          "to say what the text is")
    raise CellProblem(f"the {column} cell holds {type(cell).__name__}, not an image")


def _base64(cell: Any, column: str) -> bytes:
    if isinstance(cell, (bytes, bytearray)):
        cell = bytes(cell).decode("ascii", "replace")
    if not isinstance(cell, str) or not cell.strip():
        raise CellProblem(f"the {column} cell holds {type(cell).__name__ if cell is not None else 'nothing'}, "
                          "not base64 text")
    text = _DATA_URI.sub("", "".join(cell.split()))  # line breaks inside base64 are common
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise CellProblem(f"the {column} cell is not valid base64 text ({exc})") from None


def _dataset_file(text: Any, column: str, raw_dir: Path, image_root: str) -> Path:
    if not isinstance(text, str) or not text.strip():
        raise CellProblem(f"the {column} cell names no image file")
    text = text.strip()
    if problem := lexical_problem(text, "the dataset's folder"):
        raise CellProblem(f"the {column} cell's path {text!r} {problem}")
    path = raw_dir / image_root / text
    if not inside(raw_dir, path):
        raise CellProblem(f"the {column} cell's path {text!r} leads outside the dataset's folder")
    if not path.is_file():
        raise CellProblem(f"the {column} cell names {text!r}, which is not among the fetched files under "
                          f"{image_root!r}")
    return path

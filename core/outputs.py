"""Text written for a person to open: CSV files a spreadsheet reads, Markdown a hub or a browser renders.

Much of what the toolkit writes comes from elsewhere: file names and labels of a dataset, a manifest's title and
citation, a model's answer. Written as they are they attack their reader: a CSV cell `=HYPERLINK(...)` or
`@SUM(...)` is a formula to Excel and LibreOffice, an escape byte rewrites a terminal, a bare carriage return in
a citation starts a new Markdown line (a forged `# heading`) and `<script>` is HTML to a renderer. So every CSV
the toolkit writes goes through `write_csv`, and every Markdown table cell through `markdown_cell`:

* `csv_cell`: control characters (C0, DEL, C1, and the Unicode line and paragraph separators) become visible
  escapes (`\\n`, `\\r`, `\\t`, `\\x1b`, `\\u2028`); a **text** cell that then starts with `=`, `+`, `-` or `@`
  gets a leading `'` (OWASP's advice), which spreadsheets show and do not evaluate. Whether a cell is a number
  is decided by its type, never by its text: the float -0.26 is written as `-0.26` and stays a number; the
  text "-0.26" (a label, an id) is written as `'-0.26`, since text that looks like a number may also be the
  start of a formula (`-0.26+cmd|...`). Numbers, booleans and empty cells are written as pandas writes them.
* `markdown_cell`: every line break and control character becomes a space, `&`, `<` and `>` become HTML
  entities, and the characters that make Markdown links, images, code or table cells (`\\`, `` ` ``, `[`, `]`,
  `|`) are backslash-escaped; the text reads the same once rendered.

JSON results (scores, judge and extractor descriptions) go through `write_json`: NaN and infinities become null
(JSON has neither), numpy scalars plain numbers, text stays UTF-8, and the file is written atomically.
"""
from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmbu.core.files import atomic_path, write_bytes_atomic

if TYPE_CHECKING:
    import pandas as pd

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_LINE_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_MARKDOWN = re.compile(r"([\\`\[\]|])")


def _escaped(match: re.Match[str]) -> str:
    char = match.group(0)
    return _NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def csv_cell(value: Any) -> Any:
    """A cell as it is safe to write into a CSV file (see the module docstring); non-text values unchanged."""
    if not isinstance(value, str):
        return value
    text = _CONTROLS.sub(_escaped, value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def write_csv(path: str | Path, rows: "pd.DataFrame | Iterable[Mapping[str, Any]]",
              columns: Iterable[str] | None = None) -> Path:
    """`rows` (a DataFrame or records) as a UTF-8 CSV file with a header, every text cell through `csv_cell`,
    written atomically; `columns` picks and orders the columns (missing ones empty)."""
    import pandas as pd

    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if columns is not None:
        frame = frame.reindex(columns=list(columns))
    safe = frame.copy()
    for column in safe.columns:
        if safe[column].dtype == object or pd.api.types.is_string_dtype(safe[column].dtype):
            safe[column] = safe[column].astype(object).map(csv_cell)
    path = Path(path)
    with atomic_path(path) as temporary:
        safe.to_csv(temporary, index=False, encoding="utf-8")
    return path


def markdown_cell(value: object) -> str:
    """Text safe inside a Markdown table cell or line (see the module docstring); None is empty."""
    if value is None:
        return ""
    text = _LINE_BREAKS.sub(" ", str(value))
    return _MARKDOWN.sub(r"\\\1", html.escape(text, quote=False))


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json(path: str | Path, payload: Any) -> Path:
    """`payload` as indented UTF-8 JSON in the order it was built, NaN and infinities as null, written atomically."""
    text = json.dumps(_json_safe(payload), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    return write_bytes_atomic(path, text.encode("utf-8"))

"""Benchmarks run by hand (`make bench`, `python -m benchmarks.run`); results go into RESULTS.md."""

import os
import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def replace_results_section(heading: str, section: str, results: Path = RESULTS) -> None:
    """Put `section` (starting with `heading`) in place of that section of RESULTS.md, or append it; atomic."""
    text = results.read_text(encoding="utf-8")
    pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)
    text = pattern.sub(lambda _: section + "\n", text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section
    partial = results.with_suffix(".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, results)

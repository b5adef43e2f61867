"""Outputs safe to open (issue 32, point 7): no CSV cell the toolkit writes can start a formula or carry a raw
control byte, numbers stay numbers (decided by type), and Markdown cells cannot break out of their cell."""
from __future__ import annotations

import csv

import pandas as pd
import pytest

from mmbu.core.outputs import csv_cell, markdown_cell, write_csv

HOSTILE = ["=HYPERLINK(\"http://x\",\"y\")", "+1+2", "-2+3+cmd|' /C calc'!A0", "@SUM(A1:A2)", "\tindented",
           "\r=1", "a\x1b[31mred", "line\nbreak"]


@pytest.mark.parametrize("text", HOSTILE)
def test_a_text_cell_never_starts_a_formula_nor_carries_a_control_byte(text):
    cell = csv_cell(text)
    assert not cell.startswith(("=", "+", "-", "@", "\t", "\r"))
    assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in cell)


def test_numbers_are_decided_by_type_and_stay_numbers(tmp_path):
    frame = pd.DataFrame({"model": ["=cmd", "plain"], "delta": [-0.26, 0.5], "n": [3, -4], "label": ["-0.26", None]})
    path = write_csv(tmp_path / "scores.csv", frame)
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert rows == [["model", "delta", "n", "label"], ["'=cmd", "-0.26", "3", "'-0.26"], ["plain", "0.5", "-4", ""]]
    again = pd.read_csv(path)
    assert again["delta"].tolist() == [-0.26, 0.5] and again["n"].tolist() == [3, -4]  # still numbers
    assert csv_cell("a\x1bb\u2028c\td") == "a\\x1bb\\u2028c\\td"


def test_a_markdown_cell_cannot_forge_a_heading_a_link_html_or_a_column():
    cited = "Doe J.\r# Forged heading\n<script>alert(1)</script> [click](http://evil) | extra `code` \\"
    cell = markdown_cell(cited)
    assert "\r" not in cell and "\n" not in cell and "<script>" not in cell
    assert cell == ("Doe J. # Forged heading &lt;script&gt;alert(1)&lt;/script&gt; \\[click\\](http://evil) \\| "
                    "extra \\`code\\` \\\\")
    assert markdown_cell(None) == "" and markdown_cell(3) == "3"

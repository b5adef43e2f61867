"""The release's files are safe to open (issue 32, point 7): a manifest's citation with a bare carriage return no
longer forges a heading in the card, `<script>` in a title is text, and `exclusions.csv` (whose items and reasons
quote file names and labels a dataset chose) holds no cell a spreadsheet would run as a formula."""
from __future__ import annotations

import csv

from mmbu.build.release import write_release
from mmbu.core.exclusions import Exclusion


def test_the_card_and_exclusions_csv_neutralise_what_sources_wrote(built, tmp_path):
    first, *others = built["manifests"]
    hostile = first.model_copy(update={"title": "Cells <script>alert(1)</script>",
                                       "citation": "Doe J. Cells.\r# Forged heading\r[click](http://evil)"})
    exclusions = [*built["exclusions"],
                  Exclusion(dataset_id=first.id, item="=HYPERLINK(\"http://evil\",\"open\").png", stage="layout",
                            reason="label '@SUM(A1)' is not in the vocabulary \x1b[31m"),
                  Exclusion(dataset_id=first.id, item="-2+3+cmd|' /C calc'!A0", stage="layout", reason="+1")]
    out = tmp_path / "release"
    write_release(built["rows_by_task"], out, [hostile, *others], built["build_info"], exclusions=exclusions)

    card = (out / "README.md").read_text(encoding="utf-8")
    assert "\r" not in card and "<script>" not in card and "&lt;script&gt;" in card
    assert not any(line.lstrip().startswith("# Forged") for line in card.splitlines())
    assert "\\[click\\](http://evil)" in card  # shown as text, not a link
    with (out / "exclusions.csv").open(newline="", encoding="utf-8") as handle:
        cells = [cell for row in csv.reader(handle) for cell in row]
    assert not any(cell.startswith(("=", "+", "-", "@", "\t", "\r")) for cell in cells)
    assert "'=HYPERLINK(\"http://evil\",\"open\").png" in cells and "'+1" in cells
    assert not any("\x1b" in cell for cell in cells) and any("\\x1b[31m" in cell for cell in cells)

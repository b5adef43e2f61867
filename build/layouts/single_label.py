"""One right answer per closed question: from several label flags to one raw label, or a reason.

Shared by every layout whose source can mark more than one label per image (one-hot table columns,
`|`-joined cells, multi-hot label vectors in arrays or parquet).
"""
from __future__ import annotations

from collections.abc import Sequence


def one_label(positives: Sequence[str], no_finding: str | None) -> tuple[str | None, str | None]:
    """(raw label, None) when exactly one label is positive (or none and `no_finding` names one),
    else (None, the reason the sample is excluded)."""
    if len(positives) == 1:
        return positives[0], None
    if not positives:
        if no_finding is not None:
            return no_finding, None
        return None, ("no label is marked for this image, and the manifest names no raw label for 'no finding' "
                      "(layout.no_finding)")
    return None, (f"{len(positives)} labels are marked for this image ({', '.join(positives)}); a closed question "
                  "has one right option, so images with more than one label are left out")


def one_hot_label(values: Sequence[tuple[str, str]], positive: Sequence[str], negative: Sequence[str],
                  no_finding: str | None) -> tuple[str | None, str | None]:
    """`values` are (raw label, cell text) pairs of one row; see `one_label`. A value that is neither
    positive nor negative (CheXpert's -1.0, 'uncertain') excludes the row."""
    unclear = [f"{label}={text!r}" for label, text in values if text not in positive and text not in negative]
    if unclear:
        return None, (f"the label value(s) {', '.join(unclear)} are neither positive ({', '.join(map(repr, positive))})"
                      f" nor negative ({', '.join(map(repr, negative))})")
    return one_label([label for label, text in values if text in positive], no_finding)


def split_labels(cell: str, separator: str) -> list[str]:
    """The labels of one `|`-joined cell, stripped, empty pieces dropped, order and duplicates kept once."""
    return list(dict.fromkeys(piece.strip() for piece in cell.split(separator) if piece.strip()))

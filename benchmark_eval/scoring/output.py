"""Score artefacts as Parquet, written atomically (`mmbu.core.files`); JSON and CSV files go through
`mmbu.core.outputs` (`write_json`, `write_csv`)."""
from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from mmbu.core.files import write_bytes_atomic


def write_unless_empty(path: str | Path, records: list[dict], writer: Callable[[str | Path, list[dict]], Path]
                       ) -> Path | None:
    """`writer(path, records)`, or, with nothing to write, no file at all: an earlier scoring's file at `path` is
    removed (a one-model report must not keep a two-model report's paired comparisons), and no empty artefact is
    left to be mistaken for a result."""
    if records:
        return writer(path, records)
    Path(path).unlink(missing_ok=True)
    return None


RECORD_OUTCOME_COLUMNS = ("model", "task", "form", "template", "sample_id", "prompt_version", "status", "scored",
                          "tp", "fp", "fn", "parse_ok", "parse_path", "judge_state", "tp_assisted", "extraction")


def write_record_outcomes(path: str | Path, outcomes: pd.DataFrame) -> Path:
    """Every record's outcome — counts, parse path, judge state — as Parquet, for audits and re-analysis."""
    columns = [c for c in RECORD_OUTCOME_COLUMNS if c in outcomes]
    buffer = io.BytesIO()
    outcomes[columns].to_parquet(buffer, index=False)
    return write_bytes_atomic(path, buffer.getvalue())

"""Score artefacts as JSON and Parquet, each written atomically (`mmbu.core.files`); CSV files go through
`mmbu.core.outputs.write_csv`."""
from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from mmbu.core.files import write_bytes_atomic



def _clean(value: Any) -> Any:
    """JSON-safe: NaN/inf become null, numpy scalars become Python numbers."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json(path: str | Path, payload: Any) -> Path:
    text = json.dumps(_clean(payload), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    return write_bytes_atomic(path, text.encode("utf-8"))


RECORD_OUTCOME_COLUMNS = ("model", "task", "form", "template", "sample_id", "prompt_version", "status", "scored",
                          "tp", "fp", "fn", "parse_ok", "parse_path", "judge_state", "tp_assisted", "extraction")


def write_record_outcomes(path: str | Path, outcomes: pd.DataFrame) -> Path:
    """Every record's outcome — counts, parse path, judge state — as Parquet, for audits and re-analysis."""
    columns = [c for c in RECORD_OUTCOME_COLUMNS if c in outcomes]
    buffer = io.BytesIO()
    outcomes[columns].to_parquet(buffer, index=False)
    return write_bytes_atomic(path, buffer.getvalue())

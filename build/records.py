"""`DataFrame.to_dict(orient="records")` a column at a time.

pandas builds each record cell by cell (a Python-level step per cell, and for the Arrow-backed `str`
columns of pandas 3 an `as_py()` per cell): that made a seventh of the rows step. Here each column
is converted once, in C where pandas allows it, then boxed exactly as `to_dict` boxes it
(`maybe_box_native` on object and extension columns), so the records are equal value for value
and type for type (tests/build/test_records.py compares them over every dtype the steps make).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from pandas.core.dtypes.cast import maybe_box_native  # what to_dict boxes cells with

# cells maybe_box_native returns unchanged (numpy scalars, pd.NA and datetimes are what it converts)
_NATIVE = frozenset({str, int, float, bool, type(None), list, dict, tuple})


def _boxed(values: list[Any]) -> list[Any]:
    return values if set(map(type, values)) <= _NATIVE else list(map(maybe_box_native, values))


def column_values(column: pd.Series) -> list[Any]:
    """`[record[name] for record in frame.to_dict(orient="records")]` for one column of the frame."""
    dtype = column.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "biuf":
        return column.to_numpy().tolist()  # what iterating the Series gives: Python scalars, not boxed
    if isinstance(dtype, np.dtype) and dtype.kind == "O":
        return _boxed(column.to_numpy().tolist())  # tolist leaves the objects as they are
    if isinstance(dtype, pd.StringDtype):
        return _boxed(column.to_numpy(dtype=object).tolist())  # strings and the dtype's missing value
    values = list(column)  # any other dtype: as to_dict, a cell at a time
    return list(map(maybe_box_native, values)) if not isinstance(dtype, np.dtype) else values


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """`frame.to_dict(orient="records")`, equal value for value, without pandas' per-cell work."""
    if frame.columns.empty:
        return [{} for _ in range(len(frame))]
    names = frame.columns.tolist()
    columns = [column_values(frame.iloc[:, position]) for position in range(len(names))]
    return [dict(zip(names, row)) for row in zip(*columns)]

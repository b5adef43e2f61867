"""Run records (docs/architecture.md §3.5): one JSON line per (sample, task, form, template, model, prompt version).

``predictions.jsonl`` is append-only: a record is written once, flushed and fsynced; a re-run
appends newer records and readers take the newest per key (:func:`latest_by_key`). A run killed
mid-write leaves at most one truncated last line, which :func:`read_records` skips and reports
and :func:`repair_truncated_tail` removes before the next append.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Literal, get_args

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson
from pydantic import BaseModel, ConfigDict, ValidationError

from mmbu.core.release import FORMS, TEMPLATES, Form, Task, Template

log = logging.getLogger(__name__)

Status = Literal["ok", "error"]
RecordKey = tuple[str, str, str, str, str, str]

# Why a record is an error; one word each so reports can count them.
ERROR_REASONS = (
    "timeout",            # the server did not answer within the per-request timeout (after retries)
    "rate_limited",       # 429s outlasted the retries
    "server_error",       # 5xx outlasted the retries
    "connection_error",   # could not connect / connection dropped (after retries)
    "bad_request",        # the server rejected the request (4xx other than 408/429)
    "prompt_too_long",    # the server says the prompt (image tokens) exceeds the context
    "bad_response",       # a 200 whose body is not an OpenAI chat completion (or is one of the wrong shape)
    "response_too_large", # the answer exceeded --max-response-mib on the wire or inflated; not kept
    "empty_answer",       # the model answered with nothing
    "refused",            # the API returned a refusal / content filter instead of an answer
    "image_too_large",    # the image cannot be brought within the model's limits
    "backend_error",      # an in-process backend (vLLM / transformers) raised for this request
    "invalid_sample",     # the release row cannot be asked (empty question, no options, bad image or mask, empty mask)
)


class RunRecord(BaseModel):
    """One model answer (or the reason there is none). ``output`` is the raw text, never an error."""

    model_config = ConfigDict(extra="allow")

    sample_id: str
    task: str
    form: Form
    template: Template
    model: str
    prompt_version: str
    status: Status
    output: str | None = None
    error: str | None = None
    error_reason: str | None = None
    latency_s: float | None = None
    request_hash: str
    image_size: tuple[int, int] | None = None   # [w, h] of the original release image
    sent_size: tuple[int, int] | None = None    # [w, h] of the image the model saw
    content_size: tuple[int, int] | None = None  # [w, h] the original was resized to inside the sent canvas
    content_offset: tuple[int, int] | None = None  # [x, y] where it sits on the canvas (None: [0, 0], right/bottom padding)
    box_format: dict[str, Any] | None = None     # the registry's declared convention for this model
    attempts: int = 1
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    backend: str | None = None
    created_at: float | None = None

    @property
    def key(self) -> RecordKey:
        return record_key(self)


def record_key(record: RunRecord) -> RecordKey:
    """(sample_id, task, form, template, model, prompt_version): the identity of a record."""
    return (record.sample_id, record.task, record.form, record.template, record.model, record.prompt_version)


class RecordsError(Exception):
    """A run file is damaged beyond a truncated last line; the message names file and line."""


def append_record(path: str | Path, record: RunRecord) -> None:
    """Append one record as a JSON line and make it durable (flush + fsync) before returning."""
    with open(path, "ab") as handle:
        handle.write(dump_record(record))
        handle.flush()
        os.fsync(handle.fileno())


def dump_record(record: RunRecord) -> bytes:
    return (record.model_dump_json(exclude_none=False) + "\n").encode("utf-8")


class RecordWriter:
    """Keeps the run file open for many appends; :meth:`write_many` fsyncs once per group."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair_truncated_tail(self.path)
        self._handle = open(self.path, "ab")

    def write_many(self, records: Iterable[RunRecord]) -> None:
        self.write_lines(b"".join(dump_record(r) for r in records))

    def write_lines(self, payload: bytes) -> None:
        """Append records already serialised by :func:`dump_record` (whole lines), then fsync."""
        if payload:
            self._handle.write(payload)
            self._handle.flush()
            os.fsync(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def repair_truncated_tail(path: str | Path) -> str | None:
    """Cut an unterminated last line (a write killed midway) so appends start on a clean line.

    Returns the removed fragment (or None). The fragment never was a durable record: appends
    end with a newline and are fsynced as a whole.
    """
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return None
    with open(path, "rb+") as handle:
        size = handle.seek(0, os.SEEK_END)
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return None
        # Walk back in blocks to the last newline; everything after it is the fragment.
        keep, position, chunk = 0, size, 65536
        while position > 0:
            start = max(0, position - chunk)
            handle.seek(start)
            cut = handle.read(position - start).rfind(b"\n")
            if cut >= 0:
                keep = start + cut + 1
                break
            position = start
        handle.seek(keep)
        fragment = handle.read().decode("utf-8", errors="replace")
        handle.truncate(keep)
        handle.flush()
        os.fsync(handle.fileno())
    log.warning("%s: removed a truncated last line of %d bytes (a run was killed mid-write)", path, len(fragment))
    return fragment


def iter_records(path: str | Path, *, on_truncated: Callable[[str], None] | None = None) -> Iterator[RunRecord]:
    """Stream the records of a run file in write order (one line in memory at a time).

    A truncated last line (a kill mid-write) is skipped and reported through `on_truncated`
    (default: a logged warning). A damaged line anywhere else raises :class:`RecordsError`.
    """
    path = Path(path)
    if not path.exists():
        return
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield RunRecord.model_validate_json(line)
            except ValidationError as exc:
                if not line.endswith(b"\n") and not handle.read(1):   # the unterminated last line
                    message = f"{path}: line {number} is truncated (a run was killed mid-write); it was skipped"
                    (on_truncated or log.warning)(message)
                    return
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first.get("loc", ())) or "line"
                raise RecordsError(f"{path}: line {number} is not a valid run record ({where}: {first['msg']})") from exc


def read_records(path: str | Path, *, on_truncated: Callable[[str], None] | None = None) -> list[RunRecord]:
    """All records of a run file in write order (see :func:`iter_records`)."""
    return list(iter_records(path, on_truncated=on_truncated))


def latest_by_key(records: Iterable[RunRecord]) -> dict[RecordKey, RunRecord]:
    """The newest record (the last one written) per record key."""
    latest: dict[RecordKey, RunRecord] = {}
    for record in records:
        latest[record_key(record)] = record
    return latest


# -- the run file as a table (judge, score and report read it so) ---------------------------------------
RECORD_COLUMNS = ("sample_id", "task", "form", "template", "model", "prompt_version", "status", "output",
                  "error_reason", "image_size", "sent_size", "content_size", "content_offset", "box_format")
TEXT_COLUMNS = RECORD_COLUMNS[:9]
GEOMETRY_COLUMNS = RECORD_COLUMNS[9:]  # needed for detection records only
REQUIRED = ("sample_id", "task", "form", "template", "model", "prompt_version", "status", "request_hash")
ALLOWED = {"form": FORMS, "template": TEMPLATES, "status": get_args(Status)}


def read_records_table(path: Path, warnings: list[str]) -> pd.DataFrame:
    """The newest record per (sample, task, form, template) of a run file, as a DataFrame of :data:`RECORD_COLUMNS`.

    Read column-wise (pyarrow) when the file fits that path, which large runs need; otherwise record by record, which
    names a damaged line (:class:`RecordsError`). A truncated last line is skipped and said in `warnings`.
    """
    frame = read_records_frame(path, warnings)
    if frame is None:
        frame = records_frame(read_records(path, on_truncated=warnings.append))
    return frame


def records_frame(records: list[RunRecord]) -> pd.DataFrame:
    """The newest record per (sample, task, form, template) as a DataFrame of :data:`RECORD_COLUMNS`."""
    rows = [{name: getattr(r, name, None) for name in RECORD_COLUMNS} for r in records]
    return _newest(pd.DataFrame(rows, columns=list(RECORD_COLUMNS)))


def _newest(frame: pd.DataFrame) -> pd.DataFrame:
    # records are in write order; a re-run (or a new prompt version) appends newer ones
    for name in ("output", "error_reason"):
        frame[name] = frame[name].astype(object).where(frame[name].notna(), None)
    return frame.drop_duplicates(["sample_id", "task", "form", "template"], keep="last").reset_index(drop=True)


def _complete_lines(path: Path, warnings: list[str]) -> pa.BufferReader | Path:
    """The file, or its bytes up to the last newline when a killed writer left half a line."""
    with open(path, "rb") as handle:
        handle.seek(0, 2)
        size = handle.tell()
        if size == 0:
            return path
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return path
        handle.seek(0)
        data = handle.read()
    cut = data.rfind(b"\n") + 1
    line = data[:cut].count(b"\n") + 1
    warnings.append(f"{path}: line {line} is truncated (a run was killed mid-write); it was skipped")
    return pa.BufferReader(data[:cut])


def read_records_frame(path: Path, warnings: list[str]) -> pd.DataFrame | None:
    """Columnar read of a run file (pyarrow): the fast path for large runs.

    Returns None when the file does not fit the fast path (a damaged line, a missing field, a value
    outside the contract); the caller then reads it record by record, which names the bad line.
    Geometry columns are materialised for detection records only (the rest do not need them).
    """
    schema = pa.schema([(name, pa.string()) for name in (*TEXT_COLUMNS, "request_hash")])
    local: list[str] = []
    try:
        table = pajson.read_json(_complete_lines(path, local), parse_options=pajson.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="infer"))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None
    if table.num_rows == 0:
        return pd.DataFrame(columns=list(RECORD_COLUMNS))
    for name in REQUIRED:
        if table.column(name).null_count:
            return None
    for name, allowed in ALLOWED.items():
        if not pc.all(pc.is_in(table.column(name), value_set=pa.array(allowed))).as_py():
            return None
    frame = table.select(list(TEXT_COLUMNS)).to_pandas()
    detection = pc.equal(table.column("task"), Task.DETECTION.value)
    rows = pc.indices_nonzero(detection).to_numpy()
    for name in GEOMETRY_COLUMNS:
        column = pd.Series([None] * len(frame), dtype=object)
        if len(rows) and name in table.column_names:
            values = table.column(name).take(pa.array(rows)).to_pylist()
            column.iloc[rows] = pd.Series(values, index=rows, dtype=object)
        frame[name] = column
    warnings.extend(local)
    return _newest(frame)



"""Run records: append-only JSON lines, truncated tails, newest record per key."""
from __future__ import annotations

import json

import pytest

from mmbu.benchmark_eval.records import (RecordsError, RecordWriter, RunRecord, append_record, latest_by_key,
                                         read_records, repair_truncated_tail)


def record(sample_id: str, status: str = "ok", output: str | None = "B", **extra) -> RunRecord:
    return RunRecord(sample_id=sample_id, task="ungrounded_classification", form="closed", template="no_context",
                     model="m", prompt_version="p1", status=status, output=output, request_hash="h" + sample_id,
                     image_size=(320, 240), sent_size=(308, 224), **extra)


def test_append_and_read_round_trip(tmp_path):
    path = tmp_path / "predictions.jsonl"
    append_record(path, record("a"))
    append_record(path, record("b", status="error", output=None, error="no answer within 5 s", error_reason="timeout"))
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[1])["error_reason"] == "timeout"
    records = read_records(path)
    assert [r.sample_id for r in records] == ["a", "b"]
    assert records[0].sent_size == (308, 224)


def test_truncated_last_line_is_skipped_reported_and_repaired(tmp_path):
    path = tmp_path / "predictions.jsonl"
    append_record(path, record("a"))
    with open(path, "ab") as handle:
        handle.write(record("b").model_dump_json().encode()[:40])  # killed mid-write
    reports = []
    assert [r.sample_id for r in read_records(path, on_truncated=reports.append)] == ["a"]
    assert len(reports) == 1 and "line 2 is truncated" in reports[0]
    fragment = repair_truncated_tail(path)
    assert fragment and fragment.startswith('{"sample_id":"b"')
    with RecordWriter(path) as writer:
        writer.write_many([record("c")])
    assert [r.sample_id for r in read_records(path)] == ["a", "c"]


def test_damage_in_the_middle_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "predictions.jsonl"
    path.write_text(record("a").model_dump_json() + "\n{not json}\n" + record("b").model_dump_json() + "\n")
    with pytest.raises(RecordsError, match="line 2 is not a valid run record"):
        read_records(path)


def test_latest_by_key_keeps_the_newest(tmp_path):
    records = [record("a", status="error", output=None, error_reason="timeout"), record("b"), record("a", output="C")]
    latest = latest_by_key(records)
    assert len(latest) == 2
    assert latest[("a", "ungrounded_classification", "closed", "no_context", "m", "p1")].output == "C"

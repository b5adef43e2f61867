"""parquet over Arrow IPC: `datasets` `save_to_disk` folders (`<split>/data-00000-of-00001.arrow`, the IPC stream
format, with `dataset_info.json` and `state.json` beside it) and IPC files (Feather v2) written by pyarrow, read with
the same columns, ClassLabel names and boxes as Parquet, a record batch slice at a time."""
from __future__ import annotations

import io
import tracemalloc

import numpy as np
import pyarrow as pa
from datasets import ClassLabel, Dataset, DatasetDict, Features, Image as ImageFeature, Sequence, Value
from PIL import Image
from support.build_manifests import make_manifest

from mmbu.build.layouts import read_samples
from mmbu.build.layouts.table_files import TableFile

CELL_LABELS = {"cell": "cell", "debris": "debris"}


def png(array):
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def saved_to_disk(raw):
    """A `DatasetDict.save_to_disk` folder as `datasets` writes it (`dataset_dict.json`, `train/` and `test/`, each
    with `data-00000-of-00001.arrow`, `dataset_info.json`, `state.json`): brightfield frames with COCO-style
    `objects` ({bbox [x, y, w, h], category ClassLabel}), the shape of an Arrow-backed detection repository such as
    mario-dg/scc_real."""
    features = Features({"image": ImageFeature(),
                         "objects": {"bbox": Sequence(Sequence(Value("float32"), length=4)),
                                     "category": Sequence(ClassLabel(names=["cell", "debris"]))}})
    frames = [np.random.default_rng(seed).integers(0, 256, (40, 60, 3)).astype(np.uint8) for seed in range(3)]
    train = Dataset.from_dict({"image": [png(frames[0]), png(frames[1])],
                               "objects": [{"bbox": [[5, 6, 10, 12], [50, 30, 20, 20]], "category": [0, 1]},
                                           {"bbox": [[1, 1, 0, 4]], "category": [0]}]}, features=features)
    test = Dataset.from_dict({"image": [png(frames[2])], "objects": [{"bbox": [[0, 0, 8, 8]], "category": [1]}]},
                             features=features)
    DatasetDict({"train": train, "test": test}).save_to_disk(raw)
    return frames


def test_save_to_disk_arrow_streams_are_read_like_parquet(tmp_path):
    raw = tmp_path / "raw"
    frames = saved_to_disk(raw)
    assert (raw / "train" / "data-00000-of-00001.arrow").read_bytes()[:4] == b"\xff\xff\xff\xff"  # a stream
    layout = {"kind": "parquet", "files": "{split}/data-*.arrow", "objects_column": "objects", "splits": ["train"]}
    samples, exclusions = read_samples(make_manifest(layout, labels=CELL_LABELS, tasks=["object_detection"]), raw,
                                       tmp_path / "cache")

    first, = samples  # the second row's one box has no area: no sample
    assert (first.source_path, first.part) == ("train/data-00000-of-00001.arrow", "row=0")
    assert np.array_equal(np.asarray(Image.open(first.image_path)), frames[0])
    # category names come from the features `datasets` stored in the stream's schema (no card, none in the manifest)
    assert [(r.label, r.box) for r in first.regions] == [("cell", (5.0, 6.0, 15.0, 18.0)),
                                                         ("debris", (50.0, 30.0, 60.0, 40.0))]
    assert {e.item: e.reason for e in exclusions} == {
        "train/data-00000-of-00001.arrow#row=1#object-1": "box [1.0, 1.0, 1.0, 5.0] has no area",
        "train/data-00000-of-00001.arrow#row=1": "no annotated object with a known label is left in this image"}


def test_arrow_ipc_files_and_a_broken_file(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    table = pa.table({"image": pa.array([png(np.full((8, 8), v, np.uint8)) for v in (10, 20)], pa.binary()),
                      "label": ["cell", "debris"]})
    with pa.OSFile(str(raw / "part-0.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    (raw / "part-1.arrow").write_bytes(b"ARROW1\x00\x00not really")
    samples, exclusions = read_samples(make_manifest({"kind": "parquet", "files": "part-*.arrow", "label_column": "label"},
                                                     labels=CELL_LABELS), raw, tmp_path / "cache")

    assert [(s.part, s.label) for s in samples] == [("row=0", "cell"), ("row=1", "debris")]
    assert np.asarray(Image.open(samples[1].image_path)).tolist() == np.full((8, 8), 20).tolist()
    (exclusion,) = exclusions
    assert exclusion.item == "part-1.arrow"
    assert exclusion.reason.startswith("not a readable Parquet or Arrow IPC file (ArrowInvalid: ")


def test_arrow_rows_are_read_a_slice_at_a_time_in_order_across_record_batches(tmp_path):
    """Three record batches of 40 rows of 100 KB each (12 MB): reading them in slices of 8 rows holds one slice's
    bytes in Python, and memory-mapped batches are never copied into Arrow's own pool."""
    payloads = [bytes([i]) * 100_000 for i in range(120)]
    schema = pa.schema([("image", pa.binary()), ("n", pa.int64())])
    path = tmp_path / "data-00000-of-00001.arrow"
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
        for start in range(0, 120, 40):
            writer.write_batch(pa.record_batch([pa.array(payloads[start:start + 40], pa.binary()),
                                                pa.array(range(start, start + 40), pa.int64())], schema=schema))
    pool_before = pa.total_allocated_bytes()
    tracemalloc.start()
    seen = []
    with TableFile(path) as table:
        assert table.kind == "Arrow IPC stream"
        for row in table.rows(["n", "image"], 8):
            seen.append(row["n"])
            assert row["image"] == payloads[row["n"]]
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert seen == list(range(120))
    assert peak < 3_000_000  # one 8-row slice is 0.8 MB; the whole file would be 12 MB
    assert pa.total_allocated_bytes() - pool_before < 1_000_000


def test_a_stream_cut_short_keeps_the_rows_before_the_damage_and_names_the_file(tmp_path):
    raw = tmp_path / "raw"
    (raw / "train").mkdir(parents=True)
    schema = pa.schema([("image", pa.binary()), ("label", pa.string())])
    path = raw / "train" / "data-00000-of-00001.arrow"
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
        for value in (10, 20, 30):
            writer.write_batch(pa.record_batch([pa.array([png(np.full((8, 8), value, np.uint8))], pa.binary()),
                                                pa.array(["cell"])], schema=schema))
    whole = path.read_bytes()
    path.write_bytes(whole[:len(whole) * 3 // 4])  # the third batch is cut in the middle
    samples, exclusions = read_samples(make_manifest({"kind": "parquet", "files": "{split}/data-*.arrow",
                                                      "label_column": "label"}, labels=CELL_LABELS), raw,
                                       tmp_path / "cache")

    assert [s.part for s in samples] == ["row=0", "row=1"]
    assert np.asarray(Image.open(samples[1].image_path)).tolist() == np.full((8, 8), 20).tolist()
    (exclusion,) = exclusions
    assert exclusion.item == "train/data-00000-of-00001.arrow"
    assert exclusion.reason.startswith("the Arrow IPC stream is damaged after its first 2 rows (")

"""The release writer: one config's rows read from rows files in release order, a batch at a time, column by column,
checked, and written as shards (`write_files`). Every release goes through it: the build's per-dataset rows files,
and rows given as a DataFrame (`rows.frame_rows_files`).

The release orders a config's rows by image id, then sample id (`RELEASE_ORDER`: the rows of one image together,
so a row group stores the image once), across datasets. Each file's rows of the task are sorted so when the rows
step writes them, so the files are merged front to back (`merge_sorted`: a stable sort of the files' rows, part by
part), once: each batch is checked and its usable rows wait until the shard layout closes their row group, which is
then written. Memory holds a batch of each open file, the open row group's rows, one row group's PNGs and what the
check keeps, which does not grow with the rows: the shard layout and the card's and statistics' counts. A rows file
whose rows are not in that order is read whole and sorted (one dataset's rows, or one DataFrame's).

Rows stay Arrow columns throughout: the release columns are cast from the rows files' columns, the image names
joined, boxes rounded and the PNGs read into binary arrays.
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mmbu.build.release.rows import PNG_MAGIC, ReleaseInputError, RowsFiles, check_columns
from mmbu.build.release.shards import MAX_ROW_GROUP_BYTES, MAX_SHARD_BYTES, ShardFiles, ShardLayout
from mmbu.build.release.stats import ReleaseCounts
from mmbu.build.sorted_runs import merge_sorted, sorted_by
from mmbu.core.exclusions import Exclusion
from mmbu.core.release import RELEASE_COLUMNS, release_features

def png_file_size(path: str, what: str, named: object = None) -> int:
    """The size of the PNG file at `path`; ValueError naming it (as `named`, when given) if it cannot be read or
    is not a PNG. Plain os calls: the release checks every row's image this way."""
    named = path if named is None else named
    try:
        handle = os.open(path, os.O_RDONLY)
        try:
            head, size = os.read(handle, len(PNG_MAGIC)), os.fstat(handle).st_size
        finally:
            os.close(handle)
    except OSError as exc:
        raise ValueError(f"the {what} file {named} cannot be read ({exc.strerror or exc})") from None
    if head != PNG_MAGIC:
        raise ValueError(f"the {what} file {named} is not a PNG")
    return size


ROWS_PER_CHUNK = 1024  # rows read from a rows file at a time


@dataclass
class CheckedRows:
    """What checking a config's rows in release order found: where its usable rows go (shards and row groups), what
    the card and statistics count of them, and which rows are unusable and why."""

    layout: ShardLayout
    counts: ReleaseCounts = field(default_factory=ReleaseCounts)
    exclusions: list[Exclusion] = field(default_factory=list)

    def exclude(self, row: Mapping, reason: str) -> None:
        """A row is unusable (`row` needs dataset_id, sample_id and source_path)."""
        self.exclusions.append(Exclusion(dataset_id=row["dataset_id"], sample_id=row["sample_id"],
                                         item=str(row.get("source_path") or row["sample_id"]), stage="release",
                                         reason=reason))


PATH_COLUMNS = ("image", "mask")  # PNG paths in a rows file, PNG structs in the release
# a config's rows by image (its rows together: a row group stores the image once), then by row id
RELEASE_ORDER = ["image_sample_id", "sample_id"]
COMPUTED = ("image", "mask", "boxes", "image_sha256")  # release columns made here, not cast


@lru_cache(maxsize=1)
def release_schema() -> pa.Schema:
    """The release's Arrow schema (made once: each `release_features()` builds the Features anew)."""
    return release_features().arrow_schema


@lru_cache(maxsize=1)
def input_schema() -> pa.Schema:
    """The columns read from a rows file, in the types the release gives them (image and mask: PNG paths; boxes:
    as the rows step wrote them, rounded when written)."""
    release = release_schema()
    fields = [pa.field(name, pa.string()) if name in PATH_COLUMNS
              else pa.field(name, pa.list_(pa.list_(pa.float64()))) if name == "boxes"
              else release.field(name) for name in RELEASE_COLUMNS]
    return pa.schema([*fields, pa.field("image_sample_id", pa.string())])


def _conformed(table: pa.Table, path: str) -> pa.Table:
    arrays = []
    for field in input_schema():
        if field.name == "image_sample_id":  # the image id: the row's own where a rows file has none (its order key)
            own = table.column("sample_id").cast(pa.string())
            arrays.append(pc.coalesce(table.column(field.name).cast(pa.string()), own)
                          if field.name in table.column_names else own)
            continue
        if field.name not in table.column_names:
            arrays.append(pa.nulls(table.num_rows, field.type))
            continue
        column = table.column(field.name)
        try:  # a float is truncated to an int column's type: pandas stores whole numbers beside a missing one as floats
            arrays.append(pc.cast(column, options=pc.CastOptions(field.type, allow_float_truncate=True)))
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            raise ReleaseInputError(f"{path}: its column {field.name} ({column.type}) cannot be read as "
                                    f"{field.type} ({exc})") from None
    return pa.Table.from_arrays(arrays, schema=input_schema())


def _task_row_groups(parquet: pq.ParquetFile, task: str) -> list[int]:
    """Row groups that may hold `task` rows (by their min/max statistics; all when there are none)."""
    index = parquet.schema_arrow.get_field_index("task")
    groups = []
    for number in range(parquet.metadata.num_row_groups):
        statistics = parquet.metadata.row_group(number).column(index).statistics
        if statistics is None or not statistics.has_min_max or statistics.min <= task <= statistics.max:
            groups.append(number)
    return groups


def _tables(path: str, task: str, dropped: frozenset, columns: list[str]) -> Iterator[pa.Table]:
    """The file's rows of `task` less the duplicate drops, in file order, ROWS_PER_CHUNK at a time."""
    parquet = pq.ParquetFile(path)
    present = set(parquet.schema_arrow.names)  # a property that converts the schema each time it is read
    wanted = [c for c in columns if c in present]
    # the drops are (image id, task): the image id is image_sample_id, or the row's own id where that is null
    dropped_images = pa.array(sorted(image for image, of_task in dropped if of_task == task), pa.string())
    for batch in parquet.iter_batches(batch_size=ROWS_PER_CHUNK, row_groups=_task_row_groups(parquet, task),
                                      columns=wanted):
        table = pa.Table.from_batches([batch])
        table = table.filter(pc.fill_null(pc.equal(table.column("task"), task), False))
        if len(dropped_images) and table.num_rows:
            ids = table.column("sample_id")
            if "image_sample_id" in table.column_names:
                ids = pc.coalesce(table.column("image_sample_id").cast(ids.type), ids)
            table = table.filter(pc.invert(pc.is_in(ids.cast(pa.string()), value_set=dropped_images)))
        if table.num_rows:
            yield table


@dataclass(frozen=True)
class _Part:
    path: str
    dropped: frozenset
    in_order: bool  # the file lists its rows of the task by sample id
    first_id: str | None  # no row of the task has a smaller sample id (the file's statistics; None: unknown)

    def tables(self, task: str) -> Iterator[pa.Table]:
        """This part's rows in sample id order, in the input schema."""
        columns = list(input_schema().names)
        if self.in_order:
            for table in _tables(self.path, task, self.dropped, columns):
                yield _conformed(table, self.path)
            return
        tables = [_conformed(t, self.path) for t in _tables(self.path, task, self.dropped, columns)]
        if tables:
            whole = pa.concat_tables(tables)
            whole = whole.take(pc.sort_indices(whole, sort_keys=[(key, "ascending") for key in RELEASE_ORDER]))
            for start in range(0, whole.num_rows, ROWS_PER_CHUNK):
                yield whole.slice(start, ROWS_PER_CHUNK)


def _first_id(path: str, task: str) -> str | None:
    """The smallest image id of the row groups that may hold `task` rows, by their statistics (None: unknown, or a
    row without an image id, whose key is its own id)."""
    parquet = pq.ParquetFile(path)
    index = parquet.schema_arrow.get_field_index(RELEASE_ORDER[0])
    if index < 0:
        return None
    smallest = None
    for number in _task_row_groups(parquet, task):
        statistics = parquet.metadata.row_group(number).column(index).statistics
        if statistics is None or not statistics.has_min_max or statistics.null_count:
            return None
        smallest = statistics.min if smallest is None else min(smallest, statistics.min)
    return smallest


def _in_order(path: str, task: str, dropped: frozenset) -> bool:
    """Whether the file's rows of `task` come in release order: declared by the rows step's merge (`sorted_by`), or
    else read off the id columns (reading them was a third of the release's reads at 410 datasets)."""
    if sorted_by(pq.ParquetFile(path).schema_arrow) in (RELEASE_ORDER, ["task", *RELEASE_ORDER]):
        return True
    last = None
    for table in _tables(path, task, dropped, ["sample_id", "image_sample_id", "task"]):
        own = table.column("sample_id").cast(pa.string())
        image = pc.coalesce(table.column("image_sample_id").cast(pa.string()), own) \
            if "image_sample_id" in table.column_names else own
        keys = list(zip(image.to_pylist(), own.to_pylist()))
        if (last is not None and keys[0] < last) or any(a > b for a, b in zip(keys, keys[1:])):
            return False
        last = keys[-1]
    return True


def _image_names(table: pa.Table) -> pa.ChunkedArray:
    """`<dataset_id>/<image_sample_id or sample_id>.png`, the Image feature's `path`."""
    own = table.column("image_sample_id")
    key = pc.coalesce(pc.if_else(pc.equal(own, ""), pa.scalar(None, pa.string()), own), table.column("sample_id"))
    return pc.binary_join_element_wise(table.column("dataset_id"), "/", key, ".png", "")


def _mask_names(table: pa.Table) -> pa.ChunkedArray:
    return pc.binary_join_element_wise(table.column("dataset_id"), "/", table.column("sample_id"), "_mask.png", "")


def _int_boxes(boxes: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Boxes rounded half to even (Python's round) to int32, as list<fixed_size_list<int32, 4>>; a box of another
    length is refused (ArrowInvalid)."""
    boxes = boxes.combine_chunks() if isinstance(boxes, pa.ChunkedArray) else boxes
    inner = boxes.flatten()
    lengths = pc.list_value_length(inner)
    if len(inner) and not pc.all(pc.equal(lengths, 4)).as_py():
        raise pa.ArrowInvalid("a box does not have 4 coordinates")
    values = pc.round(inner.flatten(), round_mode="half_to_even").cast(pa.int32())
    counts = pc.fill_null(pc.list_value_length(boxes), 0).to_numpy(zero_copy_only=False)
    offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
    listed = pa.ListArray.from_arrays(offsets, pa.FixedSizeListArray.from_arrays(values, 4), mask=boxes.is_null())
    return listed.cast(release_schema().field("boxes").type)


def _nan_boxes(boxes: pa.ChunkedArray) -> np.ndarray:
    """Rows whose boxes hold a NaN or a null coordinate (no integer box can be given: `_check` excludes them)."""
    boxes = boxes.combine_chunks()
    values = pc.list_flatten(pc.list_flatten(boxes))
    if not len(values):
        return np.zeros(len(boxes), bool)
    rows = pc.list_parent_indices(pc.list_flatten(boxes)).to_numpy()
    parents = pc.list_parent_indices(boxes).to_numpy()[rows]
    bad = np.zeros(len(boxes), bool)
    bad[parents[pc.fill_null(pc.is_nan(values), True).to_numpy(zero_copy_only=False)]] = True
    return bad


def _text_weights(table: pa.Table) -> np.ndarray:
    """Each row's weight for sharding (what `ShardLayout` adds up), less its PNGs and boxes: strings by their UTF-8
    bytes, list items by their characters, anything else (numbers, nulls, the image_sha256 not made yet) 8."""
    weights = np.zeros(table.num_rows, np.int64)
    for field in input_schema():
        if field.name in COMPUTED[:3] or field.name not in RELEASE_COLUMNS:
            continue
        column = table.column(field.name).combine_chunks()
        if pa.types.is_string(field.type):
            weights += pc.fill_null(pc.binary_length(column), 8).to_numpy()
        elif pa.types.is_list(field.type):
            lengths = pc.utf8_length(pc.list_flatten(column)).to_numpy(zero_copy_only=False)
            weights += np.bincount(pc.list_parent_indices(column).to_numpy(), lengths,
                                   minlength=table.num_rows).astype(np.int64)
            if field.name != "answer_aliases":  # a missing alias list is written as [] (release_table), others null
                weights += np.where(column.is_null().to_numpy(zero_copy_only=False), 8, 0)
        else:
            weights += 8
    return weights


def _png_size(path: str | None, what: str) -> int:
    """`png_ref(path).size` of a rows file's PNG path, without its Path object: `str(Path(path))` is the path
    itself for the paths the rows step writes, and "" is the current folder."""
    if path is None:
        raise ValueError(f"the {what} is not a PNG")
    return png_file_size(path or ".", what, path)


def _check(table: pa.Table, checked: CheckedRows) -> pa.Array:
    """Check the next rows in release order: PNG headers (a file read and a stat each), weights and counts; returns
    the positions in `table` of the usable rows (int64 even when empty: `take` refuses a null-typed array)."""
    images, masks = table.column("image").to_pylist(), table.column("mask").to_pylist()
    names = _image_names(table).to_pylist()
    weights = _text_weights(table)
    nan_boxes = _nan_boxes(table.column("boxes"))
    boxes = _int_boxes(pc.if_else(pa.array(nan_boxes), pa.scalar(None, table.column("boxes").type),
                                  table.column("boxes"))).to_pylist()
    usable = []
    for row, (image, mask, name, weight, box) in enumerate(zip(images, masks, names, weights.tolist(), boxes)):
        try:
            size = _png_size(image, "image") + (8 if mask is None else _png_size(mask, "mask"))
            if nan_boxes[row]:
                raise ValueError("cannot convert float NaN to integer")
        except ValueError as exc:
            checked.exclude(table.slice(row, 1).select(["dataset_id", "sample_id", "source_path"]).to_pylist()[0],
                            str(exc))
            continue
        checked.layout.add(weight + size + (8 if box is None else sum(len(str(b)) for b in box)))
        usable.append(row)
    positions = pa.array(usable, pa.int64())
    kept = table.take(positions).select(["dataset_id", "modality", "sub_modality"]) if len(usable) < len(names) \
        else table.select(["dataset_id", "modality", "sub_modality"])
    checked.counts.add(*(kept.column(c).to_pylist() for c in kept.column_names), (names[k] for k in usable))
    return positions


class Scratch:
    """Memory for one row group's PNGs, reused by the next row group (see `release_table`).

    A new 100 MB buffer per row group is 100 MB of fresh pages, each zeroed by the kernel on first touch; on a VM
    that hands free memory back to its host (virtio-balloon free page reporting, as on this benchmark machine),
    each first touch is also a fault in the host: writing 400-800 MB into fresh page cache took 1.3-2.7 s there
    against 0.13-0.22 s into memory just freed (benchmarks/RESULTS.md, sixth round)."""

    def __init__(self) -> None:
        self._memory = np.empty(0, np.uint8)

    def get(self, size: int) -> np.ndarray:
        if size > len(self._memory):  # with room for the next groups, which rarely hold the same bytes
            self._memory = np.empty(max(size, len(self._memory) * 5 // 4), np.uint8)
        return self._memory[:size]


def _png_array(paths: list[str | None], names: list[str | None], digests: list[str] | None = None,
               scratch: Scratch | None = None) -> pa.Array:
    """The files' bytes as one binary array, each file read straight into the array's data buffer (`scratch`'s, when
    given): a row group's PNGs (up to 100 MB) are in memory once, not as a bytes object per file and again as the
    array. `digests` gets each file's sha256. The files were checked moments ago: one that stopped being a PNG fails
    the release."""
    sizes = np.array([0 if path is None else os.stat(path).st_size for path in paths], np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    data = np.empty(int(offsets[-1]), np.uint8) if scratch is None else scratch.get(int(offsets[-1]))
    view = memoryview(data)
    for path, name, start, end in zip(paths, names, offsets[:-1].tolist(), offsets[1:].tolist()):
        if path is None:
            continue
        with open(path, "rb") as handle:
            read = handle.readinto(view[start:end])
            if read != end - start or handle.read(1):
                raise ValueError(f"{name} changed while the release was written")
        if view[start:start + len(PNG_MAGIC)] != PNG_MAGIC:
            raise ValueError(f"{name} is no longer a PNG")
        if digests is not None:
            digests.append(hashlib.sha256(view[start:end]).hexdigest())
    present = pa.array([path is not None for path in paths], pa.bool_())
    nulls = len(paths) - int(pc.sum(present).as_py() or 0)
    return pa.Array.from_buffers(pa.binary(), len(paths), [present.buffers()[1] if nulls else None,
                                                          pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)],
                                 null_count=nulls)


def release_table(rows: pa.Table, scratch: tuple[Scratch, Scratch] | None = None) -> pa.Table:
    """One row group of the release from rows in the input schema: the PNGs read, hashed and embedded. With
    `scratch` (image and mask memory) the table's PNG bytes live in it: the table is valid until the next call with
    the same scratch, so it must be written (Parquet copies it into pages) and dropped before then."""
    schema = release_schema()
    image_names = _image_names(rows).combine_chunks()
    digests: list[str] = []
    image_scratch, mask_scratch = scratch or (None, None)
    image_bytes = _png_array(rows.column("image").to_pylist(), image_names.to_pylist(), digests, image_scratch)
    mask_paths = rows.column("mask").combine_chunks()
    mask_names = pc.if_else(mask_paths.is_null(), pa.scalar(None, pa.string()), _mask_names(rows).combine_chunks())
    png = schema.field("image").type
    columns = {
        "image": pa.StructArray.from_arrays([image_bytes, image_names], fields=list(png)),
        "mask": pa.StructArray.from_arrays([_png_array(mask_paths.to_pylist(), mask_names.to_pylist(),
                                                       scratch=mask_scratch), mask_names],
                                           fields=list(png), mask=mask_paths.is_null()),
        "boxes": _int_boxes(rows.column("boxes")),
        "image_sha256": pa.array(digests, pa.string()),
        "answer_aliases": pc.coalesce(rows.column("answer_aliases"), pa.scalar([], pa.list_(pa.string()))),
    }
    arrays = [columns[name] if name in columns else rows.column(name) for name in schema.names]
    return pa.Table.from_arrays(arrays, schema=schema).combine_chunks()  # single-chunk columns are not copied


class _PendingRows:
    """Usable rows checked but not yet written: the open row group's, and those of the batch that closed it."""

    def __init__(self) -> None:
        self.tables: list[pa.Table] = []

    def add(self, table: pa.Table) -> None:
        if table.num_rows:
            self.tables.append(table)

    def take(self, length: int) -> pa.Table:
        whole = pa.concat_tables(self.tables)
        rest = whole.slice(length)
        self.tables = [rest] if rest.num_rows else []
        return whole.slice(0, length)


def _closed_groups(layout: ShardLayout, written: int) -> Iterator[tuple[int, int]]:
    """(shard, rows) of the layout's row groups after the first `written`, less the last one (which later rows may
    still join): those are complete."""
    groups = [(shard, length) for shard, lengths in enumerate(layout.shards) for length in lengths]
    yield from groups[written:-1]


def write_files(files: RowsFiles, config_dir: Path, max_shard_bytes: int = MAX_SHARD_BYTES,
                max_row_group_bytes: int = MAX_ROW_GROUP_BYTES) -> tuple[list[Path], CheckedRows]:
    """Check one config's rows in release order (merged by sample id across its files) and write its shards, in one
    pass: each row group is written as soon as the layout closes it, so the rows files are read once and memory
    holds the open row group's rows (text only) and one row group's PNGs. The layout, and so every shard's bytes,
    is the one a check of all rows before writing gives: a group closes only when the next row does not fit."""
    parts = [_Part(path, dropped, _in_order(path, files.task, dropped), _first_id(path, files.task))
             for path, dropped in files.parts]
    if parts:
        check_columns(pq.ParquetFile(parts[0].path).schema_arrow.names)
    checked = CheckedRows(ShardLayout(max_shard_bytes, max_row_group_bytes))
    pending, shards, written = _PendingRows(), ShardFiles(config_dir), 0
    scratch = (Scratch(), Scratch())  # each table below is written and dropped before the next one is made
    merged = merge_sorted([part.tables(files.task) for part in parts], RELEASE_ORDER,
                          [None if part.first_id is None else (part.first_id,) for part in parts])
    try:
        for table in merged:
            usable = _check(table, checked)
            pending.add(table if len(usable) == table.num_rows else table.take(usable))
            for shard, length in list(_closed_groups(checked.layout, written)):
                shards.write(shard, release_table(pending.take(length), scratch))
                written += 1
        if checked.layout.shards:  # the last row group, which no later row can join now
            shards.write(len(checked.layout.shards) - 1,
                         release_table(pending.take(checked.layout.shards[-1][-1]), scratch))
        return shards.finish(), checked
    except BaseException as exc:
        shards.abandon(exc)
        raise

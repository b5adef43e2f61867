"""NumPy `.npy` and `.npz` arrays read one item (first-axis index) at a time, never whole.

- `.npy`: memory-mapped (`np.load(mmap_mode="r")`); an item is read from disk when it is indexed, so
  a 3 GB `masks.npy` costs one item's bytes of memory, in any order.
- `.npz` member stored without compression (`np.savez`): numpy cannot memory-map it, but the member's
  bytes lie contiguous inside the zip, so it is memory-mapped at its offset the same way.
- `.npz` member compressed with deflate (`np.savez_compressed`, as MedMNIST ships its files): deflate
  has no random access. The member is streamed: reading item i decompresses everything before it
  once, and items are read in increasing order, so a whole pass costs one decompression of the member
  (CPU) and one item's bytes of memory; going back to an earlier item starts the stream again.
- Arrays of Python objects need pickle, which can run code: they are refused, never loaded.
- Fortran-ordered members cannot be cut by first-axis item in a stream: those are loaded whole (rare;
  what it cost is recorded by the caller as a note).
"""
from __future__ import annotations

import struct
import zipfile
from pathlib import Path
from typing import IO

import numpy as np
from numpy.lib import format as npy_format


class ArrayFileError(ValueError):
    """An array that cannot be read; the message is one sentence naming the file or member."""


class ItemArray:
    """An array read item by item along its first axis (see the module docstring)."""

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, access: str) -> None:
        self.shape = shape
        self.dtype = dtype
        self.access = access  # "memory-mapped" | "streamed" | "loaded whole": said in provenance notes

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 0

    def item(self, index: int) -> np.ndarray:
        raise NotImplementedError

    def whole(self) -> np.ndarray:
        """The whole array (one image of an `items: file` layout), read item after item."""
        if not self.shape:
            raise ArrayFileError("a 0-dimensional array is not an image")
        return np.stack([self.item(i) for i in range(len(self))]) if len(self) else np.empty(self.shape, self.dtype)

    def close(self) -> None:
        """Release file handles (memory maps close with their last reference)."""


class _Mapped(ItemArray):
    def __init__(self, array: np.ndarray, access: str = "memory-mapped") -> None:
        super().__init__(tuple(array.shape), array.dtype, access)
        self._array = array

    def item(self, index: int) -> np.ndarray:
        return np.asarray(self._array[index])

    def whole(self) -> np.ndarray:
        if not self.shape:
            raise ArrayFileError("a 0-dimensional array is not an image")
        return np.asarray(self._array)


class _Streamed(ItemArray):
    """A deflated `.npz` member decompressed forward, one item at a time."""

    def __init__(self, archive: zipfile.ZipFile, info: zipfile.ZipInfo, shape: tuple[int, ...],
                 dtype: np.dtype) -> None:
        super().__init__(shape, dtype, "streamed")
        self._archive, self._info = archive, info
        self._item_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
        self._stream: IO[bytes] | None = None
        self._next = 0

    def _open(self) -> None:
        if self._stream is not None:
            self._stream.close()
        self._stream = self._archive.open(self._info)
        _read_header(self._stream, self._info.filename)
        self._next = 0

    def item(self, index: int) -> np.ndarray:
        if not 0 <= index < len(self):
            raise IndexError(index)
        if self._stream is None or index < self._next:
            self._open()  # going back costs a new pass from the start
        while self._next < index:  # skip the items in between, a bounded chunk at a time
            self._read_exactly(self._item_bytes)
            self._next += 1
        data = self._read_exactly(self._item_bytes)
        self._next += 1
        return np.frombuffer(data, dtype=self.dtype).reshape(self.shape[1:])

    def _read_exactly(self, count: int) -> bytes:
        chunks, left = [], count
        while left:
            chunk = self._stream.read(min(left, 1 << 24))
            if not chunk:
                raise ArrayFileError(f"{self._info.filename}: the member ends before its declared shape "
                                     f"{self.shape} (truncated archive)")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
        self._archive.close()


def _read_header(stream: IO[bytes], name: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    try:
        version = npy_format.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = npy_format.read_array_header_1_0(stream)
        else:
            shape, fortran, dtype = npy_format.read_array_header_2_0(stream)
    except ValueError as exc:
        raise ArrayFileError(f"{name} is not a NumPy array ({exc})") from None
    if dtype.hasobject:
        raise ArrayFileError(f"{name} holds Python objects, which only pickle can read; the build never unpickles "
                             "downloaded files")
    return tuple(int(n) for n in shape), bool(fortran), dtype


def npz_members(path: Path) -> list[str]:
    """The array names in an `.npz` file (member names without `.npy`)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return [name[:-4] for name in archive.namelist() if name.endswith(".npy")]
    except (OSError, zipfile.BadZipFile) as exc:
        raise ArrayFileError(f"{path.name} is not a readable .npz archive ({exc})") from None


def open_array(path: Path, key: str | None = None) -> ItemArray:
    """The array in a `.npy` file, or member `key` of an `.npz` file, for item-by-item reading."""
    if key is None:
        try:
            with open(path, "rb") as handle:
                magic = handle.read(len(npy_format.MAGIC_PREFIX))
        except OSError as exc:
            raise ArrayFileError(f"{path.name} cannot be read ({exc})") from None
        if magic.startswith(b"PK"):
            raise ArrayFileError(f"{path.name} is an .npz archive; name the array with `key`")
        if magic != npy_format.MAGIC_PREFIX:  # numpy would take anything else for a pickle
            raise ArrayFileError(f"{path.name} is not a readable .npy file (it does not start with NumPy's magic "
                                 "bytes)")
        try:
            array = np.load(path, mmap_mode="r", allow_pickle=False)
        except ValueError as exc:
            if "pickle" in str(exc) or "object" in str(exc):
                raise ArrayFileError(f"{path.name} holds Python objects, which only pickle can read; the build "
                                     "never unpickles downloaded files") from None
            raise ArrayFileError(f"{path.name} is not a readable .npy file ({exc})") from None
        except OSError as exc:
            raise ArrayFileError(f"{path.name} cannot be read ({exc})") from None
        return _Mapped(array)
    try:
        archive = zipfile.ZipFile(path)
        info = archive.getinfo(f"{key}.npy")
    except KeyError:
        archive.close()
        raise ArrayFileError(f"{path.name} has no array {key!r}") from None
    except (OSError, zipfile.BadZipFile) as exc:
        raise ArrayFileError(f"{path.name} is not a readable .npz archive ({exc})") from None
    with archive.open(info) as stream:
        shape, fortran, dtype = _read_header(stream, f"{path.name}:{key}")
    if info.compress_type == zipfile.ZIP_STORED and not fortran:
        offset = _member_data_offset(path, info)
        with open(path, "rb") as handle:
            handle.seek(offset)
            _read_header(handle, f"{path.name}:{key}")
            offset = handle.tell()
        archive.close()
        return _Mapped(np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape))
    if fortran:
        with archive.open(info) as stream:
            array = npy_format.read_array(stream, allow_pickle=False)
        archive.close()
        return _Mapped(array, access="loaded whole (Fortran order)")
    return _Streamed(archive, info, shape, dtype)


def _member_data_offset(path: Path, info: zipfile.ZipInfo) -> int:
    """Where a stored member's bytes start: after its local file header (30 bytes, name and extra field)."""
    with open(path, "rb") as handle:
        handle.seek(info.header_offset)
        header = handle.read(30)
    if header[:4] != b"PK\x03\x04":
        raise ArrayFileError(f"{path.name}: the zip entry of {info.filename} is damaged")
    name_length, extra_length = struct.unpack("<HH", header[26:30])
    return info.header_offset + 30 + name_length + extra_length

"""NumPy `.npy` and `.npz` arrays, HDF5 datasets and multi-page TIFF stacks read one item (first-axis index, a
TIFF's page) at a time, never whole.

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
- HDF5 (`.h5`, `.hdf5`, `.hdf`; h5py): the `key` names a dataset inside the file (`volumes/raw`); an item
  is read by h5py's hyperslab selection, so only the chunks holding it are read and decompressed. Keys
  are data, never paths out of the file: `..` parts are refused, and a key that reaches an external link,
  a virtual dataset built from other files or a dataset stored in external raw files is refused before
  anything outside the file is opened (the dataset's folder confines every read).
"""
from __future__ import annotations

import struct
import zipfile
from pathlib import Path
from typing import IO, TYPE_CHECKING

import numpy as np
from numpy.lib import format as npy_format

from mmbu.core import budget
from mmbu.curation.manifest.hints import did_you_mean

if TYPE_CHECKING:
    import h5py
    import tifffile


class ArrayFileError(ValueError):
    """An array that cannot be read; the message is one sentence naming the file or member."""


class ItemArray:
    """An array read item by item along its first axis (see the module docstring).

    What each read would cost is known from the shape the file declares, so `item`, `items` and `whole` refuse
    a read over the budget (`mmbu.core.budget`) before they touch the data: a sparse `.npy` of 50000² or a deflated
    `.npz` member of 40000² costs a sentence, not gigabytes. Subclasses implement `_item`, `_items` and `_whole`.
    """

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, access: str, name: str = "the array") -> None:
        self.shape = shape
        self.dtype = dtype
        self.access = access  # "memory-mapped" | "streamed" | "loaded whole": said in provenance notes
        self.name = name  # the file (and member or key) in messages

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 0

    def item(self, index: int) -> np.ndarray:
        self._check(1)
        return self._item(index)

    def whole(self) -> np.ndarray:
        """The whole array (one image of an `items: file` layout)."""
        if not self.shape:
            raise ArrayFileError("a 0-dimensional array is not an image")
        self._check(len(self), whole=True)
        return self._whole()

    def items(self, start: int, stop: int) -> np.ndarray:
        """Items [start, stop) as one array (a slab of a volume)."""
        self._check(max(0, min(stop, len(self)) - start))
        return self._items(start, stop)

    def _check(self, count: int, whole: bool = False) -> None:
        """Refuse `count` items over the budget's bytes, or one item (or whole 2-D array) over its pixels."""
        shape = tuple(self.shape) if whole else tuple(self.shape[1:])
        try:
            if len(shape) >= 2:  # an image (H, W[, C]) or a volume's slices: its plane is the last two of H, W
                plane = shape[-3:-1] if len(shape) >= 3 and shape[-1] <= 4 else shape[-2:]
                budget.check_plane(self.name, plane[1], plane[0], kind="array image")
            per_item = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize
            budget.check_bytes(self.name, per_item * count, f"{count:,} array item(s) of shape {self.shape[1:]}"
                               if not whole else f"an array of shape {self.shape}")
        except budget.OverBudget as exc:
            raise ArrayFileError(str(exc)) from None

    def _item(self, index: int) -> np.ndarray:
        raise NotImplementedError

    def _whole(self) -> np.ndarray:
        return np.stack([self._item(i) for i in range(len(self))]) if len(self) else np.empty(self.shape, self.dtype)

    def _items(self, start: int, stop: int) -> np.ndarray:
        return np.stack([self._item(i) for i in range(start, min(stop, len(self)))])

    def close(self) -> None:
        """Release file handles (memory maps close with their last reference)."""


class _Mapped(ItemArray):
    def __init__(self, array: np.ndarray, name: str, access: str = "memory-mapped") -> None:
        super().__init__(tuple(array.shape), array.dtype, access, name)
        self._array = array

    def _item(self, index: int) -> np.ndarray:
        return np.asarray(self._array[index])

    def _items(self, start: int, stop: int) -> np.ndarray:
        return np.asarray(self._array[start:stop])

    def _whole(self) -> np.ndarray:
        return np.asarray(self._array)


class _Streamed(ItemArray):
    """A deflated `.npz` member decompressed forward, one item at a time."""

    def __init__(self, archive: zipfile.ZipFile, info: zipfile.ZipInfo, shape: tuple[int, ...],
                 dtype: np.dtype) -> None:
        super().__init__(shape, dtype, "streamed", f"{Path(str(archive.filename)).name}:{info.filename}")
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

    def _item(self, index: int) -> np.ndarray:
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
    """The array names in an `.npz` file (member names without `.npy`), or the datasets of an HDF5 file."""
    if is_hdf5(path):
        return hdf5_datasets(path)
    try:
        with zipfile.ZipFile(path) as archive:
            return [name[:-4] for name in archive.namelist() if name.endswith(".npy")]
    except (OSError, zipfile.BadZipFile) as exc:
        raise ArrayFileError(f"{path.name} is not a readable .npz archive ({exc})") from None


def open_array(path: Path, key: str | None = None) -> ItemArray:
    """The array in a `.npy` file, member `key` of an `.npz` file or dataset `key` of an HDF5 file, for
    item-by-item reading."""
    if is_hdf5(path):
        return _open_hdf5(path, key)
    if is_tiff(path):
        if key is not None:
            raise ArrayFileError(f"{path.name} is a TIFF file: its stack is its pages, with no key to name")
        return _open_tiff(path)
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
        return _Mapped(array, path.name)
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
        return _Mapped(np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape), f"{path.name}:{key}")
    if fortran:
        try:  # read whole: the whole member must fit the budget
            budget.check_bytes(f"{path.name}:{key}", int(np.prod(shape, dtype=np.int64)) * dtype.itemsize,
                               f"a Fortran-ordered array of shape {shape}, read whole")
        except budget.OverBudget as exc:
            archive.close()
            raise ArrayFileError(str(exc)) from None
        with archive.open(info) as stream:
            array = npy_format.read_array(stream, allow_pickle=False)
        archive.close()
        return _Mapped(array, f"{path.name}:{key}", access="loaded whole (Fortran order)")
    return _Streamed(archive, info, shape, dtype)


def read_value(path: Path, key: str | None = None) -> np.ndarray:
    """A small array read whole: one sample's label stored in its own file (a 0-d `.npz` member such as
    FairVision's `glaucoma`, which has no first axis to read item by item). The header's shape and dtype are
    checked first (`open_array`: object arrays refused, the budget kept), then NumPy's reader loads it."""
    array = open_array(path, key)
    try:
        name = array.name
        try:
            budget.check_bytes(name, int(np.prod(array.shape, dtype=np.int64)) * array.dtype.itemsize,
                               f"an array of shape {array.shape}")
        except budget.OverBudget as exc:
            raise ArrayFileError(str(exc)) from None
        if isinstance(array, _Hdf5):
            return array._read(())
        if isinstance(array, _TiffPages):
            raise ArrayFileError(f"{path.name} is a TIFF image, not a label value")
    finally:
        array.close()
    try:
        if key is None:
            return np.load(path, allow_pickle=False)
        with np.load(path, allow_pickle=False) as archive:
            return archive[key]
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise ArrayFileError(f"{name} cannot be read ({exc})") from None


def _member_data_offset(path: Path, info: zipfile.ZipInfo) -> int:
    """Where a stored member's bytes start: after its local file header (30 bytes, name and extra field)."""
    with open(path, "rb") as handle:
        handle.seek(info.header_offset)
        header = handle.read(30)
    if header[:4] != b"PK\x03\x04":
        raise ArrayFileError(f"{path.name}: the zip entry of {info.filename} is damaged")
    name_length, extra_length = struct.unpack("<HH", header[26:30])
    return info.header_offset + 30 + name_length + extra_length


# --- HDF5 -----------------------------------------------------------------------------------------

TIFF_MAGICS = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")  # classic and BigTIFF, either byte order


def is_tiff(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(4) in TIFF_MAGICS
    except OSError:
        return False


class _TiffPages(ItemArray):
    """The pages of a multi-page TIFF's first series (an image or label stack, DenseCell's `train-labels.tif`):
    item i is page i, decoded when asked for, so a long movie costs one page of memory."""

    def __init__(self, tiff: "tifffile.TiffFile", path: Path) -> None:
        series = tiff.series[0]
        self._pages = list(series.pages)
        keyframe = series.keyframe
        super().__init__((len(self._pages), *keyframe.shape), np.dtype(keyframe.dtype),
                         f"TIFF, {len(self._pages)} pages read one at a time")
        self._tiff, self._name = tiff, path.name

    def item(self, index: int) -> np.ndarray:
        page = self._pages[index]
        if page is None:
            raise ArrayFileError(f"{self._name}: page {index} is missing from the file")
        try:
            return np.asarray(page.asarray())
        except Exception as exc:  # noqa: BLE001 - tifffile and imagecodecs raise their own types
            raise ArrayFileError(f"{self._name}: page {index} cannot be decoded ({exc})") from None

    def close(self) -> None:
        self._tiff.close()


def _open_tiff(path: Path) -> ItemArray:
    import tifffile

    try:
        tiff = tifffile.TiffFile(path)
    except Exception as exc:  # noqa: BLE001 - TiffFileError, struct errors, OSError on truncated headers
        raise ArrayFileError(f"{path.name} is not a readable TIFF file ({exc})") from None
    if not tiff.series or not tiff.series[0].pages:
        tiff.close()
        raise ArrayFileError(f"{path.name} holds no image")
    return _TiffPages(tiff, path)


HDF5_SUFFIXES = (".h5", ".hdf5", ".hdf")
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


def is_hdf5(path: Path) -> bool:
    """An HDF5 file by its signature (at byte 0; files with a user block are named by their suffix)."""
    try:
        with open(path, "rb") as handle:
            if handle.read(len(HDF5_MAGIC)) == HDF5_MAGIC:
                return True
    except OSError:
        return False
    return path.suffix.lower() in HDF5_SUFFIXES


class _Hdf5(ItemArray):
    """A dataset of an open HDF5 file; items are hyperslabs read chunk by chunk by h5py."""

    def __init__(self, handle: "h5py.File", dataset: "h5py.Dataset") -> None:
        chunks = f"chunks {tuple(dataset.chunks)}" if dataset.chunks else "contiguous"
        compression = f", {dataset.compression}" if dataset.compression else ""
        super().__init__(tuple(int(n) for n in dataset.shape), dataset.dtype,
                         f"HDF5, read a slice at a time ({chunks}{compression})",
                         f"{Path(handle.filename).name}:{dataset.name}")
        self._handle, self._dataset = handle, dataset

    def _item(self, index: int) -> np.ndarray:
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._read(index)

    def _items(self, start: int, stop: int) -> np.ndarray:
        return self._read(slice(start, min(stop, len(self))))

    def _whole(self) -> np.ndarray:
        return self._read(())

    def _read(self, selection: int | slice | tuple) -> np.ndarray:
        try:
            return np.asarray(self._dataset[selection])
        except (OSError, ValueError) as exc:  # a damaged chunk or filter surfaces on the read
            raise ArrayFileError(f"{Path(self._handle.filename).name}:{self._dataset.name} cannot be read "
                                 f"({str(exc).strip() or type(exc).__name__})") from None

    def close(self) -> None:
        self._handle.close()


def hdf5_datasets(path: Path) -> list[str]:
    """The names of the datasets in an HDF5 file, reached by links inside it (external links not followed)."""
    import h5py

    names: list[str] = []
    try:
        with h5py.File(path, "r") as handle:
            handle.visititems(lambda name, node: names.append(name) if isinstance(node, h5py.Dataset) else None)
    except OSError as exc:
        raise ArrayFileError(f"{path.name} is not a readable HDF5 file ({exc})") from None
    return sorted(names)


def _open_hdf5(path: Path, key: str | None) -> ItemArray:
    import h5py

    if key is None:
        raise ArrayFileError(f"{path.name} is an HDF5 file; name its dataset with `key` (e.g. volumes/raw)")
    try:
        handle = h5py.File(path, "r")
    except OSError as exc:
        raise ArrayFileError(f"{path.name} is not a readable HDF5 file ({exc})") from None
    try:
        dataset = _dataset_inside(handle, key, path.name)
    except BaseException:
        handle.close()
        raise
    return _Hdf5(handle, dataset)


def _dataset_inside(handle: "h5py.File", key: str, name: str, depth: int = 0) -> "h5py.Dataset":
    """The dataset `key` names, reached only through links inside the file (see the module docstring)."""
    import h5py

    parts = [part for part in key.split("/") if part]
    if not parts or any(part in (".", "..") for part in parts) or depth > 16:
        raise ArrayFileError(f"{name}: {key!r} is not a dataset key inside the file")
    node: h5py.Group | h5py.Dataset = handle
    for index, part in enumerate(parts):
        if not isinstance(node, h5py.Group):
            raise ArrayFileError(f"{name}: {'/'.join(parts[:index])!r} is a dataset, so {key!r} does not exist")
        link = node.get(part, getlink=True)
        if link is None:
            raise ArrayFileError(f"{name} has no dataset {key!r}{did_you_mean(key, hdf5_datasets(Path(handle.filename)))}")
        if isinstance(link, h5py.ExternalLink):
            raise ArrayFileError(f"{name}: {key!r} goes through an external link to {link.filename!r}; only data "
                                 "inside the file are read")
        if isinstance(link, h5py.SoftLink):  # resolved by hand, so its own path is checked the same way
            node = _dataset_inside(handle, link.path, name, depth + 1) if index == len(parts) - 1 else \
                _group_inside(handle, link.path, name, depth + 1)
        else:
            node = node[part]
    if not isinstance(node, h5py.Dataset):
        raise ArrayFileError(f"{name}: {key!r} is a group, not a dataset{did_you_mean(key, hdf5_datasets(Path(handle.filename)))}")
    if node.is_virtual and any(source.file_name != "." for source in node.virtual_sources()):
        raise ArrayFileError(f"{name}: {key!r} is a virtual dataset built from other files; only data inside the "
                             "file are read")
    if node.external:
        raise ArrayFileError(f"{name}: {key!r} keeps its data in external files ({node.external[0][0]!r}); only "
                             "data inside the file are read")
    if node.dtype.hasobject:
        raise ArrayFileError(f"{name}: {key!r} holds variable-length objects, not image values")
    return node


def _group_inside(handle: "h5py.File", path: str, name: str, depth: int) -> "h5py.Group":
    import h5py

    parts = [part for part in path.split("/") if part]
    node = handle
    for part in parts:
        if part in (".", "..") or depth > 16 or not isinstance(node, h5py.Group):
            raise ArrayFileError(f"{name}: the soft link to {path!r} does not lead to a group inside the file")
        link = node.get(part, getlink=True)
        if link is None or isinstance(link, h5py.ExternalLink):
            raise ArrayFileError(f"{name}: the soft link to {path!r} leaves the file or leads nowhere")
        node = _group_inside(handle, link.path, name, depth + 1) if isinstance(link, h5py.SoftLink) else node[part]
    return node

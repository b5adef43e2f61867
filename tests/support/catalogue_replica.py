"""Small replicas of real datasets' file trees, written from a data spec by the field's own writers.

A replica spec (`tests/catalogue/replicas/<manifest id>.yaml`) names a manifest of `manifests/datasets/`, the
evidence its tree follows (`cites`: one of that manifest's `evidence.layout` sources), the files to write and
what the manifest's own layout must find in them:

    manifest: bccd
    cites: Shenggan/BCCD_Dataset@d272fb14cdff6e473fafeeeba32aba5f560e9e43:BCCD/Annotations/BloodImage_00000.xml
    files:
      - path: BCCD/JPEGImages/BloodImage_00000.jpg
        image: {size: [640, 480]}
      - path: BCCD/Annotations/BloodImage_00000.xml
        text: |
          <annotation>...</annotation>
    expect:
      samples: 1                  # samples the layout reads
      labels: {RBC: 2, WBC: 1}    # raw labels counted over image labels and regions
      exclusions: 0               # optional; default 0

File kinds (one key besides `path`):
  image: {size: [w, h], mode: RGB | L | I;16}   .png .jpg .jpeg .bmp .tif .tiff (Pillow; 16-bit TIFF by tifffile),
                                                .dcm (pydicom), .nii / .nii.gz (nibabel; `depth` slices),
                                                .mha / .nrrd (SimpleITK; `depth` slices), .mrc (mrcfile; `depth`)
  mask: {size: [w, h], regions: [{value: 1, box: [x0, y0, x1, y1]}], depth: n}   same suffixes; box end exclusive;
        a region with `color: [r, g, b]` instead of `value` makes an RGB colour-coded mask
  text: a literal string          json: any YAML value, dumped as JSON
  csv: {rows: [[...], ...], delimiter: ","}
  xlsx: {sheets: {name: [[...], ...]}}           an Excel workbook written by openpyxl, sheets in the order given
  arrays: {key: {shape: [...], dtype: uint8, values: [...]}}   .npz (`values` flat, else a ramp); .npy: key `array`;
          .tif / .tiff (tifffile): key `array`, a multi-page stack of its first axis;
          .h5 (h5py; keys are dataset paths such as volumes/raw);
          a mask stack: {shape: [N, H, W], regions: [{index: 0, value: 1, box: [x0, y0, x1, y1]}]} (zeros elsewhere;
          for a (D, H, W) volume `index` is the slice; for one (H, W, C) item `channel: c` fills that channel;
          a (H, W) shape is one item, `index` left out)
  parquet: {columns: {name: [values] or {images: [{size: [w, h]}, ...]}}}   image columns as {bytes, path} structs;
           {masks: [{size: [w, h], regions: [...]}, ...]} writes label masks (PNG) the same way
  video: {size: [w, h], frames: n, fps: 25}     .mp4 (PyAV, H.264; each frame a ramp shifted by its index)
"""
from __future__ import annotations

import io
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[2]
SPEC_DIR = ROOT / "tests" / "catalogue" / "replicas"
DATASETS = ROOT / "manifests" / "datasets"
TRAILS = ROOT / "manifests" / "reviews" / "catalogue"
FILE_KINDS = ("image", "mask", "text", "json", "csv", "xlsx", "arrays", "parquet", "video")


@lru_cache(maxsize=None)
def catalogue_manifests() -> tuple[Any, ...]:
    """Every manifest of manifests/datasets, loaded once per test process (several modules parametrise over them at
    collection); shared, so read-only."""
    from mmbu.curation.manifest import find_manifest_files, load_manifest

    return tuple(load_manifest(path) for path in find_manifest_files([DATASETS]))


def is_demo(manifest: Any) -> bool:
    """Demo manifests read the bundled mirror (manifests/mirror); they are not sources of the catalogue."""
    return manifest.id.startswith("demo_")


def load_specs() -> list[dict[str, Any]]:
    specs = []
    for path in sorted(SPEC_DIR.glob("*.yaml")):
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
        spec["_path"] = path
        specs.append(spec)
    return specs


def ramp(width: int, height: int, channels: int = 0, dtype: str = "uint8") -> np.ndarray:
    """A gradient, so no written image is constant."""
    plane = np.add.outer(np.arange(height) * 3, np.arange(width) * 2) % 256
    plane = (plane * 257 if dtype == "uint16" else plane).astype(dtype)  # 16-bit spans the full range
    return np.stack([plane] * channels, axis=-1) if channels else plane


def mask_array(spec: dict[str, Any]) -> np.ndarray:
    width, height = spec["size"]
    dtype = spec.get("dtype", "uint8")
    regions = spec.get("regions", [])
    if any("color" in region for region in regions):  # colour-coded class masks (one RGB colour per class)
        array = np.zeros((height, width, 3), dtype="uint8")
        for region in regions:
            x0, y0, x1, y1 = region["box"]
            array[y0:y1, x0:x1] = region["color"]
        return array
    array = np.zeros((height, width), dtype=dtype)
    for region in regions:
        x0, y0, x1, y1 = region["box"]
        array[y0:y1, x0:x1] = region["value"]
    if spec.get("rgb"):  # masks some datasets ship as RGB (white on black)
        array = np.stack([array] * 3, axis=-1)
    return array


def write_raster(path: Path, array: np.ndarray, depth: int | None = None) -> None:
    name = path.name.lower()
    if name.endswith((".nii", ".nii.gz")):
        import nibabel

        volume = np.stack([array.T] * (depth or 3), axis=-1)  # (x, y, z) as NIfTI stores it
        nibabel.save(nibabel.Nifti1Image(volume, np.eye(4)), str(path))
    elif name.endswith((".mha", ".nrrd")):
        import SimpleITK as sitk  # MetaImage / NRRD volumes (SPIDER, PSFHS) as SimpleITK writes them

        sitk.WriteImage(sitk.GetImageFromArray(np.stack([array] * (depth or 3))), str(path))
    elif name.endswith((".mrc", ".mrcs", ".rec")):
        import mrcfile  # tomograms and label tomograms as mrcfile writes them: (z, y, x)

        with mrcfile.new(str(path), overwrite=True) as mrc:
            mrc.set_data(np.ascontiguousarray(np.stack([array] * (depth or 3))))
    elif name.endswith(".dcm"):
        write_dicom(path, array)
    elif name.endswith((".tif", ".tiff")) and array.dtype != np.uint8:
        import tifffile

        tifffile.imwrite(path, array)
    else:
        from PIL import Image

        Image.fromarray(array).save(path)


def write_video(path: Path, spec: dict[str, Any]) -> None:
    """An H.264 MP4 written by PyAV (FFmpeg's encoder), as the lung ultrasound clips of COVID-BLUES are stored."""
    from fractions import Fraction

    import av

    width, height = spec["size"]
    fps = spec.get("fps", 25)
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.time_base = Fraction(1, fps)
        for index in range(spec.get("frames", 10)):
            frame = av.VideoFrame.from_ndarray(np.roll(ramp(width, height, 3), index, axis=1), format="rgb24")
            frame.pts = index
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def write_dicom(path: Path, array: np.ndarray) -> None:
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid

    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.1.1"  # digital X-ray image storage
    meta.MediaStorageSOPInstanceUID = generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = Dataset()
    ds.file_meta = meta
    ds.SOPClassUID, ds.SOPInstanceUID = meta.MediaStorageSOPClassUID, meta.MediaStorageSOPInstanceUID
    ds.Modality = "DX"
    grey = array if array.ndim == 2 else array[..., 0]
    ds.Rows, ds.Columns = grey.shape
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 0
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.PixelData = (grey.astype(np.uint16) * 16).tobytes()
    ds.save_as(path, enforce_file_format=True)


def png_bytes(width: int, height: int, array: np.ndarray | None = None) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(ramp(width, height, 3) if array is None else array).save(buffer, format="PNG")
    return buffer.getvalue()


def write_parquet(path: Path, columns: dict[str, Any]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = {}
    for name, values in columns.items():
        if isinstance(values, dict) and "images" in values:
            table[name] = [{"bytes": png_bytes(*item["size"]), "path": item.get("path", f"{index}.png")}
                           for index, item in enumerate(values["images"])]
        elif isinstance(values, dict) and "masks" in values:  # label masks stored as images (a mask column)
            table[name] = [{"bytes": png_bytes(*item["size"], array=mask_array(item)),
                            "path": item.get("path", f"{index}_mask.png")}
                           for index, item in enumerate(values["masks"])]
        else:
            table[name] = values
    pq.write_table(pa.table(table), path)


def write_arrays(path: Path, arrays: dict[str, Any]) -> None:
    built = {}
    for key, spec in arrays.items():
        dtype = spec.get("dtype", "uint8")
        if "values" in spec:
            built[key] = np.asarray(spec["values"], dtype=dtype).reshape(spec["shape"])
        elif "regions" in spec:  # a mask stack: zeros with value-filled boxes in the items named by `index`
            built[key] = np.zeros(spec["shape"], dtype=dtype)
            for region in spec["regions"]:
                x0, y0, x1, y1 = region["box"]
                if "channel" in region:  # one (H, W, C) item: the box filled in that channel
                    built[key][y0:y1, x0:x1, region["channel"]] = region["value"]
                elif len(spec["shape"]) == 2:  # one (H, W) item, e.g. a per-image instance map
                    built[key][y0:y1, x0:x1] = region["value"]
                else:
                    built[key][region.get("index", 0), y0:y1, x0:x1] = region["value"]
        else:
            size = int(np.prod(spec["shape"]))
            built[key] = (np.arange(size) % 251).astype(dtype).reshape(spec["shape"])
    if path.suffix == ".npy":
        np.save(path, built["array"])
    elif path.suffix in (".tif", ".tiff"):  # a multi-page TIFF stack (key `array`), one page per first-axis index
        import tifffile

        tifffile.imwrite(path, built["array"], photometric="minisblack")  # grey pages, never planar RGB
    elif path.suffix in (".h5", ".hdf5"):  # HDF5 datasets by key, chunked and compressed as h5py writes them
        import h5py

        with h5py.File(path, "w") as handle:
            for key, array in built.items():
                handle.create_dataset(key, data=array, chunks=True, compression="gzip")
    else:
        np.savez(path, **built)


def write_workbook(path: Path, sheets: dict[str, list[list[Any]]]) -> None:
    """An .xlsx workbook as openpyxl writes it: numbers stay numbers (a label 1 is a numeric cell, not text)."""
    from openpyxl import Workbook

    workbook = Workbook()
    workbook.remove(workbook.active)
    for name, rows in sheets.items():
        sheet = workbook.create_sheet(name)
        for row in rows:
            sheet.append(row)
    workbook.save(path)


def write_file(root: Path, entry: dict[str, Any]) -> Path:
    """Write one spec entry under `root` with the writer its kind and suffix call for."""
    path = root / entry["path"]
    path.parent.mkdir(parents=True, exist_ok=True)
    kinds = [kind for kind in FILE_KINDS if kind in entry]
    if len(kinds) != 1:
        raise ValueError(f"{entry['path']}: give exactly one of {', '.join(FILE_KINDS)} (got {kinds or 'none'})")
    kind, spec = kinds[0], entry[kinds[0]]
    if kind == "image":
        width, height = spec["size"]
        mode = spec.get("mode", "RGB")
        array = ramp(width, height, 3 if mode == "RGB" else 0, "uint16" if mode == "I;16" else "uint8")
        write_raster(path, array, spec.get("depth"))
    elif kind == "mask":
        write_raster(path, mask_array(spec), spec.get("depth"))
    elif kind == "text":
        path.write_text(spec, encoding="utf-8")
    elif kind == "json":
        path.write_text(json.dumps(spec), encoding="utf-8")
    elif kind == "csv":
        delimiter = spec.get("delimiter", ",")
        path.write_text("".join(delimiter.join(str(cell) for cell in row) + "\n" for row in spec["rows"]),
                        encoding="utf-8")
    elif kind == "xlsx":
        write_workbook(path, spec["sheets"])
    elif kind == "arrays":
        write_arrays(path, spec)
    elif kind == "video":
        write_video(path, spec)
    else:
        write_parquet(path, spec["columns"])
    return path


def build_replica(spec: dict[str, Any], root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for entry in spec["files"]:
        write_file(root, entry)
    return root


def layout_shape(layout: Any) -> str:
    """A layout's shape: its kind and the options it sets (two manifests with the same shape read alike)."""
    fields = layout.model_dump(exclude_defaults=True)
    kind = fields.pop("kind", layout.kind)
    return f"{kind}({', '.join(sorted(fields))})"

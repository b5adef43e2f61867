"""Regenerate the dcmtk golden PNGs for `test_oracle_dicom.py` (run by hand; needs dcmtk's `dcmj2pnm`).

    cd /work/main && .venv/bin/python tests/build/convert/golden/make_dicom_golden.py

dcmtk is not available to users or CI, so its output is committed: this script writes the small
DICOM inputs with the pydicom factories (`factories_dicom.py`) into `golden/dicom/inputs/`, renders
every case with `dcmj2pnm` into `golden/dicom/<case>.png` and records the cases (input, dcmtk command
line, our options, tolerance) in `golden/dicom/cases.json`, which the test reads. Inputs named
`pydicom:<file>` are pydicom's bundled test files (`pydicom.data.get_testdata_file`).

Where our window is not a file window (percentile window), dcmtk cannot compute the same window; the
case renders with dcmtk's `+Ww c w` set to *our recorded* window (as DICOM LINEAR center/width), so it
checks the mapping, inversion and modality LUT, and the test separately pins the recorded window.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import factories_dicom as fd  # noqa: E402
from pydicom import Dataset, dcmread  # noqa: E402
from pydicom.data import get_testdata_file  # noqa: E402
from pydicom.sequence import Sequence  # noqa: E402
from pydicom.uid import RLELossless, generate_uid  # noqa: E402

from mmbu.build.convert.base import ConvertOptions  # noqa: E402
from mmbu.build.convert.dispatch import read_image  # noqa: E402

OUT = HERE / "dicom"
INPUTS = OUT / "inputs"
GREY = {"max_abs": 1, "mean_abs": 1.0}  # dcmtk truncates where we round: never more than one level apart
# YCbCr -> RGB: dcmtk's integer formula lands up to 3 levels from the original RGB where pydicom's lands
# within 1 (checked in the test), so the two may sit 2 apart
YBR = {"max_abs": 2, "mean_abs": 1.0}
LOSSY_COLOUR = {"max_abs": 3, "mean_abs": 1.0}  # two JPEG decoders (IDCT, chroma upsampling) may differ slightly
# Square pixels: dcmtk (`+a +Sxf 1`, default interpolation) replicates rows where we resample with LANCZOS,
# so grey levels at edges differ by up to ~50 and no direct grey tolerance says anything. What is checked
# instead: dcmtk's output size exactly; the two-level object thresholded at mid-grey exactly as dcmtk's
# (geometry: no row offset, no flip); and our grey levels within 2 of dcmtk's own stored-grid rendering
# (case `resampled_from`) resized to that size with Pillow's LANCZOS (window first, then the filter).
TALL_PIXELS = {"resampled_from": "ct_tall_pixels_stored_grid", "filter": "lanczos", "threshold": 127,
               "max_threshold_mismatch": 0, "filtered_max_abs": 2, "filtered_mean_abs": 1.0}


def _noise(rows: int, columns: int, low: int, high: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(low, high, size=(rows, columns))


def _marker_ramp(rows: int = 48, columns: int = 64) -> np.ndarray:
    """12-bit ramp along the columns with a bright block in the top-left (orientation check)."""
    stored = np.tile(np.linspace(0, 4095, columns).round(), (rows, 1))
    stored[2:10, 2:14] = 3500
    return stored.astype(np.uint16)


def _colour_scene(rows: int = 48, columns: int = 64) -> np.ndarray:
    yy, xx = np.mgrid[0:rows, 0:columns]
    rgb = np.stack([xx * 255 // (columns - 1), yy * 255 // (rows - 1), 255 - xx * 255 // (columns - 1)], axis=-1)
    rgb[4:20, 4:24] = (230, 30, 40)  # a red block top-left
    rgb[28:44, 40:60] = (20, 200, 60)  # a green block bottom-right
    return rgb.astype(np.uint8)


def build_inputs() -> dict[str, Path]:
    """Write the factory inputs; returns case-input name -> path."""
    INPUTS.mkdir(parents=True, exist_ok=True)
    made = {}
    ramp = _marker_ramp()
    made["ct_file_window"] = fd.write_ct(INPUTS / "ct_file_window.dcm", ramp, window=(40.0, 400.0))
    made["ct_second_window"] = fd.write_ct(INPUTS / "ct_second_window.dcm", ramp,
                                           window=[(40.0, 400.0), (-600.0, 1500.0)])
    signed = (ramp.astype(np.int32) - 2048).astype(np.int16)  # -2048..2047 stored, slope 2
    made["ct_signed_slope"] = fd.write_ct(INPUTS / "ct_signed_slope.dcm", signed, slope=2.0, intercept=-24.0,
                                          window=(100.0, 3000.0), signed=True)
    made["ct_no_window"] = fd.write_ct(INPUTS / "ct_no_window.dcm", _noise(48, 64, 0, 4096, 1).astype(np.uint16),
                                       window=None)
    sparse = np.zeros((48, 64), np.uint16)  # 9 bright pixels of 3072: the 0.5/99.5 percentiles coincide
    sparse[5, 5:9], sparse[30, 40], sparse[20, 50:54] = 3000, 1200, 2200
    made["ct_sparse_min_max"] = fd.write_ct(INPUTS / "ct_sparse_min_max.dcm", sparse, window=None)
    made["ct_rle"] = fd.write_ct(INPUTS / "ct_rle.dcm", ramp, transfer_syntax=RLELossless, window=(1000.0, 2000.0))
    made["cr_mono1_window"] = fd.write_monochrome1(INPUTS / "cr_mono1_window.dcm", ramp, window=(2048.0, 3000.0))
    made["cr_mono1_no_window"] = fd.write_monochrome1(INPUTS / "cr_mono1_no_window.dcm", ramp)
    # non-conformant but seen in the wild: dcmtk lets the explicit IDENTITY win (not inverted), and so do we
    made["cr_mono1_identity"] = fd.write_monochrome1(INPUTS / "cr_mono1_identity.dcm", ramp, window=(2048.0, 3000.0),
                                                     presentation_shape="IDENTITY")
    made["ct_tall_pixels"] = _tall_pixel_disc(INPUTS / "ct_tall_pixels.dcm")
    made["cr_negative_slope"] = fd.write_monochrome1(INPUTS / "cr_negative_slope.dcm", ramp, window=(-2048.0, 3000.0),
                                                     slope=-1.0, intercept=0.0)
    made["dx_inverse_shape"] = _inverse_shape_mono2(INPUTS / "dx_inverse_shape.dcm", ramp)
    gamma = (np.linspace(0.0, 1.0, 4096) ** 0.5 * 65535).round()
    made["dx_voi_lut_16bit"] = fd.write_with_voi_lut(INPUTS / "dx_voi_lut_16bit.dcm", ramp, gamma, lut_bits=16)
    partial = (np.linspace(0.0, 1.0, 4096) ** 2 * 3000 + 500).round()  # 12-bit LUT that does not span 0..4095
    twelve_in_sixteen = (np.linspace(0.0, 1.0, 4096) ** 2 * 4095).round()  # declares 16 bits, uses 12
    made["dx_voi_lut_depth_overstated"] = fd.write_with_voi_lut(INPUTS / "dx_voi_lut_depth_overstated.dcm", ramp,
                                                                twelve_in_sixteen, lut_bits=16)
    made["dx_voi_lut_12bit_partial"] = fd.write_with_voi_lut(INPUTS / "dx_voi_lut_12bit_partial.dcm", ramp, partial,
                                                             lut_bits=12)
    for function in ("SIGMOID", "LINEAR_EXACT"):
        ds = fd.ct_dataset(ramp, window=(40.0, 400.0))
        ds.VOILUTFunction = function
        made[f"ct_{function.lower()}"] = fd.save(ds, INPUTS / f"ct_{function.lower()}.dcm")
    made["cr_mono1_voi_lut"] = _monochrome1_with_voi_lut(INPUTS / "cr_mono1_voi_lut.dcm", ramp)
    made["cr_modality_lut"] = _modality_lut_sequence(INPUTS / "cr_modality_lut.dcm", ramp)
    noisy_high_bits = fd.ct_dataset(ramp, window=(40.0, 400.0))  # bits above Bits Stored (old overlays) set
    noisy_high_bits.PixelData = (ramp | 0xF000).astype("<u2").tobytes()
    made["ct_high_bits_set"] = fd.save(noisy_high_bits, INPUTS / "ct_high_bits_set.dcm")
    frames = np.stack([ramp // (k + 1) + 300 * k for k in range(5)]).astype(np.uint16)
    made["ct_multiframe_middle"] = fd.write_multiframe(INPUTS / "ct_multiframe_middle.dcm", frames)
    made["ct_enhanced_frame_window"] = fd.write_multiframe(
        INPUTS / "ct_enhanced_frame_window.dcm", frames,
        per_frame_windows=[(0.0, 500.0), (200.0, 800.0), (1000.0, 1200.0), (-500.0, 3000.0), (40.0, 400.0)])
    scene = _colour_scene()
    made["rgb_ybr_full"] = fd.write_rgb(INPUTS / "rgb_ybr_full.dcm", scene, photometric="YBR_FULL")
    made["rgb_jpeg_ybr_full_422"] = fd.write_jpeg_baseline(INPUTS / "rgb_jpeg_ybr_full_422.dcm", scene)
    indices = (np.arange(48 * 64).reshape(48, 64) % 7).astype(np.uint8)
    palette = np.array([[0, 0, 0], [255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 0], [40, 90, 200], [255, 255, 255]])
    made["palette"] = fd.write_palette(INPUTS / "palette.dcm", indices, palette)
    for name, path in made.items():
        _fix_uids(name, path)
    return made


def _fix_uids(name: str, path: Path) -> None:
    """UIDs derived from the case name, so regenerating leaves unchanged inputs byte-identical."""
    ds = dcmread(path)
    for keyword in ("StudyInstanceUID", "SeriesInstanceUID", "SOPInstanceUID"):
        setattr(ds, keyword, generate_uid(entropy_srcs=[name, keyword]))
    ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID
    ds.save_as(path, enforce_file_format=True)


def _inverse_shape_mono2(path: Path, stored: np.ndarray) -> Path:
    ds = fd.base_dataset(fd.CR_IMAGE, "DX")
    ds.set_pixel_data(stored.astype(np.uint16), "MONOCHROME2", 12)
    ds.RescaleSlope, ds.RescaleIntercept = 1.0, 0.0
    ds.WindowCenter, ds.WindowWidth = 2048.0, 4096.0
    ds.PresentationLUTShape = "INVERSE"
    return fd.save(ds, path)


def _tall_pixel_disc(path: Path) -> Path:
    """A round object on 2:1 pixels (Pixel Spacing 1.0 \\ 0.5 mm), stored as a wide ellipse, plus a block in
    the top-left corner (orientation); two levels, 500 and 3000, which the file window maps to 0 and 255."""
    yy, xx = np.mgrid[0:48, 0:64]
    inside = ((yy + 0.5 - 24) / 16) ** 2 + ((xx + 0.5 - 36) / 24) ** 2 <= 1
    stored = np.where(inside, 3000, 500).astype(np.uint16)
    stored[2:8, 2:10] = 3000
    return fd.write_ct(path, stored, slope=1.0, intercept=0.0, window=(1750.0, 2500.0),
                       attributes={"PixelSpacing": [1.0, 0.5]})


def _lut_item(values: np.ndarray, bits: int) -> Dataset:
    item = Dataset()
    item.LUTDescriptor = [len(values), 0, bits]
    item.LUTData = [int(v) for v in values.round()]
    item["LUTData"].VR = "US"
    return item


def _cr_dataset(stored: np.ndarray, photometric: str) -> Dataset:
    ds = fd.base_dataset(fd.CR_IMAGE, "CR")
    ds.set_pixel_data(stored.astype(np.uint16), photometric, 12)
    return ds


def _monochrome1_with_voi_lut(path: Path, stored: np.ndarray) -> Path:
    ds = _cr_dataset(stored, "MONOCHROME1")
    ds.VOILUTSequence = Sequence([_lut_item(np.linspace(0.0, 1.0, 4096) ** 0.7 * 4095, 12)])
    return fd.save(ds, path)


def _modality_lut_sequence(path: Path, stored: np.ndarray) -> Path:
    """A Modality LUT Sequence (optical density, 16-bit) instead of rescale, and a window in its units."""
    ds = _cr_dataset(stored, "MONOCHROME2")
    item = _lut_item(np.linspace(0.0, 1.0, 4096) ** 2 * 60000, 16)
    item.ModalityLUTType = "OD"
    ds.ModalityLUTSequence = Sequence([item])
    ds.WindowCenter, ds.WindowWidth = 20000.0, 30000.0
    return fd.save(ds, path)


# case -> (input, dcmtk options, our ConvertOptions fields, tolerance)
CASES: dict[str, tuple[str, list[str], dict, dict]] = {
    "ct_file_window": ("ct_file_window", ["+Wi", "1"], {}, GREY),
    "ct_second_window": ("ct_second_window", ["+Wi", "2"], {"window_index": 1}, GREY),
    "ct_signed_slope": ("ct_signed_slope", ["+Wi", "1"], {}, GREY),
    "ct_no_window": ("ct_no_window", ["+Ww", "OURS"], {}, GREY),
    # our percentile window falls back to min-max here, which is exactly dcmtk's +Wm: the window
    # choice itself is checked, not only the mapping
    "ct_sparse_min_max": ("ct_sparse_min_max", ["+Wm"], {}, GREY),
    "ct_user_window": ("ct_file_window", ["+Ww", "-600", "1500"], {"window": [-600.0, 1500.0]}, GREY),
    "ct_rle": ("ct_rle", ["+Wi", "1"], {}, GREY),
    "ct_sigmoid": ("ct_sigmoid", ["+Wi", "1"], {}, GREY),
    "ct_linear_exact": ("ct_linear_exact", ["+Wi", "1"], {}, GREY),
    "ct_high_bits_set": ("ct_high_bits_set", ["+Wi", "1"], {}, GREY),
    "cr_mono1_voi_lut": ("cr_mono1_voi_lut", ["+Wl", "1"], {}, GREY),
    "cr_modality_lut": ("cr_modality_lut", ["+Wi", "1"], {}, GREY),
    "cr_mono1_window": ("cr_mono1_window", ["+Wi", "1"], {}, GREY),
    "cr_mono1_no_window": ("cr_mono1_no_window", ["+Ww", "OURS"], {}, GREY),
    "cr_mono1_user_window": ("cr_mono1_window", ["+Ww", "1000", "2000"], {"window": [1000.0, 2000.0]}, GREY),
    "cr_negative_slope": ("cr_negative_slope", ["+Wi", "1"], {}, GREY),
    "cr_mono1_identity": ("cr_mono1_identity", ["+Wi", "1"], {}, GREY),
    # the stored grid (dcmtk does not scale by default; we are told not to) and the squared image
    "ct_tall_pixels_stored_grid": ("ct_tall_pixels", ["+Wi", "1"], {"square_pixels": False}, GREY),
    "ct_tall_pixels": ("ct_tall_pixels", ["+Wi", "1", "+a", "+Sxf", "1"], {}, TALL_PIXELS),
    "dx_inverse_shape": ("dx_inverse_shape", ["+Wi", "1"], {}, GREY),
    "dx_voi_lut_16bit": ("dx_voi_lut_16bit", ["+Wl", "1"], {}, GREY),
    "dx_voi_lut_12bit_partial": ("dx_voi_lut_12bit_partial", ["+Wl", "1"], {}, GREY),
    # dcmtk's --ignore-vlut-depth (+Mv): the LUT depth is what its largest entry needs (our rule)
    "dx_voi_lut_depth_overstated": ("dx_voi_lut_depth_overstated", ["+Wl", "1", "+Mv"], {}, GREY),
    "ct_multiframe_middle": ("ct_multiframe_middle", ["+F", "3", "+Ww", "OURS"], {}, GREY),
    "ct_multiframe_frame1": ("ct_multiframe_middle", ["+F", "2", "+Ww", "OURS"], {"frame": 1}, GREY),
    "ct_enhanced_frame_window": ("ct_enhanced_frame_window", ["+F", "3", "+Ww", "OURS_CW"], {}, GREY),
    "rgb_ybr_full": ("rgb_ybr_full", [], {}, YBR),
    "rgb_jpeg_ybr_full_422": ("rgb_jpeg_ybr_full_422", [], {}, LOSSY_COLOUR),
    "palette": ("palette", [], {}, GREY),
    "pydicom_mr_small": ("pydicom:MR_small.dcm", ["+Wi", "1"], {}, GREY),
    "pydicom_mr_small_rle": ("pydicom:MR_small_RLE.dcm", ["+Wi", "1"], {}, GREY),
    "pydicom_mr_small_bigendian": ("pydicom:MR_small_bigendian.dcm", ["+Wi", "1"], {}, GREY),
    "pydicom_ct_small": ("pydicom:CT_small.dcm", ["+Ww", "OURS"], {}, GREY),
    "pydicom_overlay_second_window": ("pydicom:examples_overlay.dcm", ["+Wi", "2"], {"window_index": 1}, GREY),
    "pydicom_palette": ("pydicom:examples_palette.dcm", [], {}, GREY),
    "pydicom_ybr_full_422_uncompressed": ("pydicom:SC_ybr_full_422_uncompressed.dcm", [], {}, YBR),
    "pydicom_jpeg_ybr_full_422": ("pydicom:SC_rgb_dcmtk_+eb+cy+np.dcm", [], {}, LOSSY_COLOUR),
    "pydicom_jpeg_ybr_full": ("pydicom:SC_rgb_dcmtk_+eb+cy+n1.dcm", [], {}, LOSSY_COLOUR),
    "pydicom_jpeg_rgb_no_transform": ("pydicom:SC_jpeg_no_color_transform.dcm", [], {}, LOSSY_COLOUR),
    "pydicom_ybr_multiframe_middle": ("pydicom:examples_ybr_color.dcm", ["+F", "16"], {}, LOSSY_COLOUR),
    "pydicom_rgb_rle_16bit_2frame_middle": ("pydicom:SC_rgb_rle_16bit_2frame.dcm", ["+F", "2"], {}, GREY),
    "pydicom_rgb_rle_32bit": ("pydicom:SC_rgb_rle_32bit.dcm", [], {}, GREY),
    "pydicom_rgb_big_endian": ("pydicom:ExplVR_BigEnd.dcm", [], {}, GREY),
    "pydicom_rgb_jpeg_lossy_gdcm": ("pydicom:SC_rgb_jpeg_lossy_gdcm.dcm", [], {}, LOSSY_COLOUR),
    "pydicom_rtdose_32bit_no_window": ("pydicom:rtdose_1frame.dcm", ["+Ww", "OURS"], {}, GREY),
    "pydicom_deflated_no_window": ("pydicom:image_dfl.dcm", ["+Ww", "OURS"], {}, GREY),
    "pydicom_mr_padded_file_window": ("pydicom:MR_small_padded.dcm", ["+Wi", "1"], {}, GREY),
}


def input_path(name: str) -> Path:
    if name.startswith("pydicom:"):
        return Path(get_testdata_file(name.split(":", 1)[1]))
    return INPUTS / f"{name}.dcm"


def our_options(fields: dict) -> ConvertOptions:
    values = dict(fields)
    if "window" in values:
        values["window"] = tuple(values["window"])
    return ConvertOptions(**values)


def dicom_linear_center_width(lo: float, hi: float) -> tuple[float, float]:
    """The DICOM LINEAR (center, width) whose black/white bounds are our `(lo, hi)` (PS3.3 C.11.2.1.2.1)."""
    return (lo + hi) / 2.0 + 0.5, hi - lo + 1.0


def dcmtk_arguments(options: list[str], source: Path, fields: dict) -> tuple[list[str], dict | None]:
    """Resolve OURS (our recorded percentile window) and OURS_CW (our recorded file window center/width).

    Returns the dcmtk options and, when one was resolved, our recorded window (which the test pins).
    """
    if "OURS" not in options and "OURS_CW" not in options:
        return options, None
    window = read_image(source, our_options(fields)).params["window"]
    resolved = []
    for option in options:
        if option == "OURS":
            center, width = dicom_linear_center_width(window["lo"], window["hi"])
            resolved += [repr(center), repr(width)]
        elif option == "OURS_CW":
            resolved += [repr(float(window["center"])), repr(float(window["width"]))]
        else:
            resolved.append(option)
    return resolved, window


def main() -> None:
    build_inputs()
    version = subprocess.run(["dcmj2pnm", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    records = {}
    for case, (source_name, options, fields, tolerance) in CASES.items():
        source = input_path(source_name)
        arguments, window = dcmtk_arguments(options, source, fields)
        command = ["dcmj2pnm", "+on", "-mf", "-O", *arguments, str(source), str(OUT / f"{case}.png")]
        subprocess.run(command, check=True)
        shown = ["dcmj2pnm", "+on", "-mf", "-O", *arguments, source_name if ":" in source_name else f"inputs/{source.name}",
                 f"{case}.png"]
        records[case] = {"input": source_name, "dcmtk": " ".join(shown), "options": fields, "tolerance": tolerance,
                         "our_window": window}
    (OUT / "cases.json").write_text(json.dumps({"dcmtk_version": version, "cases": records}, indent=1) + "\n")
    print(f"{len(records)} cases written with {version}")


if __name__ == "__main__":
    main()

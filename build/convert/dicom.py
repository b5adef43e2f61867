"""DICOM → 8-bit display pixels, following the display chain of the standard (PS3.3 C.11, PS3.4 N.2).

Grayscale: stored values → Modality LUT (rescale slope/intercept or LUT) → VOI (the file's VOI LUT or
window, chosen by index; else a robust 0.5–99.5 percentile window; or the user's window) → 8 bits
scaled by the VOI output range, never by the image min/max → Presentation LUT *after* windowing:
inverted when the Presentation LUT Shape is INVERSE, or, without a shape, when the image is
MONOCHROME1 (see `presentation_inversion` for why an explicit IDENTITY on MONOCHROME1 is not
inverted). A negative rescale slope already flips polarity inside the modality LUT and is not
"fixed" again.

Colour: YBR_FULL / YBR_FULL_422 become RGB exactly once, inside pydicom (`raw=False`); PALETTE COLOR
goes through `apply_color_lut`.

Non-square pixels (Pixel Spacing, else Imager Pixel Spacing, else Pixel Aspect Ratio — dcmtk's order;
ultrasound and secondary captures often have them) are made square on the displayed 8-bit image by
enlarging the coarser axis and keeping the finer one (LANCZOS; NEAREST for masks), as
`dcmj2pnm +a +Sxf 1` does for tall pixels. `square_pixels` records what was done and the geometry a
`square_pixels` step from the stored grid, which `mmbu.build.layouts.frames` uses to carry boxes and masks
given in stored-pixel coordinates onto the PNG. `ConvertOptions(square_pixels=False)` (manifest `convert:
square_pixels: false`, `mmbu convert --no-square-pixels`) keeps the stored grid and says so.

Only the chosen frame of a multi-frame file is decoded (`pixel_array(path, index=k)`); enhanced
multi-frame files take that frame's rescale and window from the functional groups. Compressed pixel
data is decoded by the first permissively licensed plugin that succeeds, in `DECODER_PREFERENCE`
order; the GPL `pylibjpeg-libjpeg` backend is never used. The report records transfer syntax,
photometric interpretation, decoder, window (and where it came from), inversion (and why), pixel shape
and frame.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
from pydicom import Dataset, dcmread
from pydicom.multival import MultiValue
from pydicom.pixels import (
    apply_color_lut,
    apply_icc_profile,
    apply_modality_lut,
    apply_voi_lut,
    get_decoder,
    pixel_array,
)
from pydicom.uid import (
    DeflatedExplicitVRLittleEndian,
    ExplicitVRBigEndian,
    ExplicitVRLittleEndian,
    ImplicitVRLittleEndian,
    JPEGLSTransferSyntaxes,
    JPEGTransferSyntaxes,
    UID,
)

from mmbu.build.convert.base import SQUARE_PIXELS_OFF_NOTE, ConversionError, Converted, ConvertOptions
from mmbu.build.convert.dicom_io import (
    check_pixel_budget,
    check_pixel_data_complete,
    read_deflated_dataset,
    read_header,
)
from mmbu.build.convert.display import (
    center_width_to_bounds,
    invert,
    resize_to,
    robust_window,
    square_pixel_size,
    to_label_image,
    window_to_uint8,
)
from mmbu.core.geometry import ConversionGeometry

# Tried in this order; a plugin missing from pydicom's list for a transfer syntax is skipped.
# pylibjpeg first for JPEG 2000 / RLE (openjpeg, pylibjpeg-rle); pyjpegls for JPEG-LS; gdcm for JPEG;
# Pillow last (pydicom advises against it for JPEG because of its colour handling).
DECODER_PREFERENCE = ("pylibjpeg", "pyjpegls", "gdcm", "pydicom", "pillow")
# For these syntaxes pydicom's "pylibjpeg" plugin means pylibjpeg-libjpeg, which is GPL-3: never used.
GPL_ONLY_PLUGIN = {uid: "pylibjpeg" for uid in (*JPEGTransferSyntaxes, *JPEGLSTransferSyntaxes)}

MONOCHROME = ("MONOCHROME1", "MONOCHROME2")
RGB_AFTER_DECODING = ("RGB", "YBR_FULL", "YBR_FULL_422", "YBR_ICT", "YBR_RCT")  # pydicom/J2K hand back RGB

# Per-frame functional group macros whose attributes apply to one frame (enhanced multi-frame).
FRAME_MACROS = {
    "PixelValueTransformationSequence": ("RescaleSlope", "RescaleIntercept", "RescaleType"),
    "FrameVOILUTSequence": ("WindowCenter", "WindowWidth", "VOILUTFunction", "WindowCenterWidthExplanation"),
    "PixelMeasuresSequence": ("PixelSpacing",),
}

# Where a pixel's shape is read from, in dcmtk's order (DiImage): the physical spacing, the detector
# spacing of projection radiographs, then the nominal aspect ratio. Each holds (vertical, horizontal):
# the distance between rows first, then between columns.
PIXEL_SHAPE_ATTRIBUTES = ("PixelSpacing", "ImagerPixelSpacing", "PixelAspectRatio")


def read(path: Path, options: ConvertOptions) -> Converted:
    """Read one frame of a DICOM image as 8-bit L or RGB (or its label values with `as_mask`)."""
    path = Path(path)
    header = _read_header(path)
    if "Rows" not in header or "Columns" not in header:
        kind = getattr(header.get("SOPClassUID"), "name", None) or "object"
        raise ConversionError(f"{path} is a DICOM {kind} without image pixel data")
    check_pixel_budget(header, path)  # before any decoder allocates what the header claims
    transfer_syntax = _transfer_syntax(header)
    if transfer_syntax != DeflatedExplicitVRLittleEndian:  # a deflated stream is checked as it is inflated
        check_pixel_data_complete(path, header)
    frames = _number_of_frames(header)
    frame = choose_frame(options.frame, frames, path)
    view = frame_view(header, frame)
    stored, decoder = decode_frame(path, header, transfer_syntax, frame)
    photometric = str(header.get("PhotometricInterpretation", "")).strip().upper()
    params: dict[str, Any] = {
        "transfer_syntax": transfer_syntax.name,
        "transfer_syntax_uid": str(transfer_syntax),
        "photometric_interpretation": photometric,
        "decoder": decoder,
        "modality": str(header.get("Modality", "")) or None,
        "frame": frame,
        "frames": frames,
    }
    if options.as_mask:
        if stored.ndim != 2:
            raise ConversionError(f"{path} is a colour image ({photometric}) and cannot be read as a label mask")
        pixels = to_label_image(stored)
        params["values"] = "stored labels kept"
    elif photometric in MONOCHROME:
        pixels = _grayscale_to_display(stored, view, photometric, options, params, path)
    elif photometric == "PALETTE COLOR":
        pixels = _to_srgb(_palette_to_rgb(stored, view, path), header, params)
        params["colour"] = "palette LUT applied"
    elif photometric in RGB_AFTER_DECODING:
        pixels = _to_srgb(_rgb_to_8bit(stored, header, path), header, params)
        params["colour"] = "RGB" if photometric == "RGB" else f"{photometric} converted to RGB by pydicom on decoding"
    else:
        raise ConversionError(f"{path} has photometric interpretation {photometric or 'missing'}, which is not supported")
    geometry = ConversionGeometry.kept((pixels.shape[1], pixels.shape[0]))
    pixels = _square_pixels(pixels, view, options.as_mask, params, enabled=options.square_pixels)
    geometry = geometry.then("square_pixels", (pixels.shape[1], pixels.shape[0]),
                             how="nearest" if options.as_mask else "lanczos")
    return Converted(pixels=pixels, format="dicom", frame=frame if frames > 1 else None, params=params,
                     geometry=geometry)


def _read_header(path: Path) -> Dataset:
    try:
        return read_header(path)  # a deflated dataset is inflated only as far as its pixel data
    except ConversionError:
        raise
    except Exception as error:  # pydicom raises many types on damaged headers
        raise ConversionError(f"{path} has a DICOM header that cannot be parsed ({error})") from None


def _transfer_syntax(header: Dataset) -> UID:
    """The declared transfer syntax, or the one pydicom inferred for a file without file meta."""
    declared = getattr(header, "file_meta", Dataset()).get("TransferSyntaxUID")
    if declared:
        return UID(declared)
    implicit_vr, little_endian = header.original_encoding
    if little_endian is False:
        return ExplicitVRBigEndian
    return ImplicitVRLittleEndian if implicit_vr else ExplicitVRLittleEndian


def _number_of_frames(header: Dataset) -> int:
    try:
        return max(1, int(header.get("NumberOfFrames") or 1))
    except (TypeError, ValueError):
        return 1


def choose_frame(requested: int | str, frames: int, path: Path) -> int:
    """0-based frame index: 'middle' is `frames // 2`; an index outside the file is an error.

    A single-frame file ignores the request, so one `--frame` can serve a batch mixing both kinds.
    """
    if requested == "middle" or frames == 1:
        return frames // 2
    index = int(requested)
    if not 0 <= index < frames:
        raise ConversionError(f"frame {index} was requested but {path} has {frames} frame(s) (0-based)")
    return index


def frame_view(header: Dataset, frame: int) -> Dataset:
    """A shallow copy of `header` carrying this frame's rescale and window (enhanced multi-frame).

    Per-frame functional groups override the shared ones, which override the top-level attributes;
    pydicom's LUT functions read the top level only, so the frame's values are lifted there.
    """
    view = Dataset(header)
    view.file_meta = getattr(header, "file_meta", Dataset())
    view.set_original_encoding(*header.original_encoding)
    groups = []
    for sequence_name, index in (("SharedFunctionalGroupsSequence", 0), ("PerFrameFunctionalGroupsSequence", frame)):
        sequence = header.get(sequence_name)
        if sequence and len(sequence) > index:
            groups.append(sequence[index])
    for group in groups:
        for macro, keywords in FRAME_MACROS.items():
            items = group.get(macro)
            if not items:
                continue
            for keyword in keywords:
                if keyword in items[0]:
                    setattr(view, keyword, items[0].get(keyword))
    return view


def decode_frame(path: Path, header: Dataset, transfer_syntax: UID, frame: int) -> tuple[np.ndarray, str]:
    """Decode one frame with the first permissive plugin that succeeds; returns (array, plugin name)."""
    try:
        decoder = get_decoder(transfer_syntax)
    except NotImplementedError:
        raise ConversionError(
            f"{path} uses the transfer syntax {transfer_syntax.name} ({transfer_syntax}), which pydicom cannot decode"
        ) from None
    if decoder.is_native:
        plugins = [""]
    else:
        excluded = GPL_ONLY_PLUGIN.get(transfer_syntax)
        plugins = [p for p in DECODER_PREFERENCE if p in decoder.available_plugins and p != excluded]
        if not plugins:
            raise ConversionError(
                f"{path} is compressed as {transfer_syntax.name} and no installed permissively licensed decoder "
                f"can read it (pydicom reports: {'; '.join(decoder.missing_dependencies) or 'no plugin'})"
            )
    failures = []
    for plugin in plugins:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # pydicom warns about fixable header quirks; the result is checked
                return _pixel_array(path, header, transfer_syntax, frame, plugin), plugin or "pydicom (native)"
        except (RuntimeError, ValueError, NotImplementedError, AttributeError, KeyError, OSError, EOFError) as error:
            message = _first_line(error)
            failures.append(message if decoder.is_native or message.startswith(f"{plugin}:") else f"{plugin}: {message}")
    if decoder.is_native:
        raise ConversionError(f"{path} has pixel data that is truncated or corrupt ({failures[0]})")
    hint = ""
    if transfer_syntax in GPL_ONLY_PLUGIN and any("does not support" in failure for failure in failures):
        hint = " (the GPL-licensed pylibjpeg-libjpeg, which also reads such JPEG variants, is deliberately not used)"
    raise ConversionError(
        f"{path} ({transfer_syntax.name}) could not be decoded by any installed decoder{hint}: {'; '.join(failures)}"
    )


def _pixel_array(path: Path, header: Dataset, transfer_syntax: UID, frame: int, plugin: str) -> np.ndarray:
    declared = getattr(header, "file_meta", Dataset()).get("TransferSyntaxUID")
    if declared and transfer_syntax != DeflatedExplicitVRLittleEndian:
        return pixel_array(path, index=frame, decoding_plugin=plugin)  # reads only this frame's bytes
    # A deflated dataset cannot be read in place (it is inflated, within its declared size), and a file
    # without file meta has no declared syntax: read the whole dataset and decode the frame from it.
    dataset = read_deflated_dataset(path) if declared else dcmread(path, force=True)
    if not declared:
        dataset.file_meta.TransferSyntaxUID = transfer_syntax
    return pixel_array(dataset, index=frame, decoding_plugin=plugin)


def _first_line(error: BaseException) -> str:
    """The informative part of a pydicom error: its own plugin-by-plugin lines without the preamble."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if lines and lines[0].startswith("Unable to decode as exceptions were raised"):
        lines = lines[1:]
    return " ".join(lines[:3]) if lines else type(error).__name__


def _grayscale_to_display(
    stored: np.ndarray, view: Dataset, photometric: str, options: ConvertOptions, params: dict, path: Path
) -> np.ndarray:
    if stored.ndim != 2:
        raise ConversionError(f"{path} says {photometric} but its frame has shape {stored.shape}")
    values = apply_modality_lut(stored, view)
    if "RescaleSlope" in view and "RescaleIntercept" in view and not view.get("ModalityLUTSequence"):
        params["rescale"] = {"slope": float(view.RescaleSlope), "intercept": float(view.RescaleIntercept)}
    elif view.get("ModalityLUTSequence"):
        params["rescale"] = "modality LUT"

    if options.window is not None:
        center, width = options.window
        lo, hi = center_width_to_bounds(center, width)
        pixels = window_to_uint8(values, lo, hi)
        params["window"] = {"center": center, "width": width, "source": "user"}
    else:
        pixels = _file_voi(values, view, options.window_index, params, path)
        if pixels is None:
            padding = _padding_mask(stored, view)
            lo, hi, source = robust_window(values, ignore=padding)
            pixels = window_to_uint8(values, lo, hi)
            params["window"] = {
                "lo": lo, "hi": hi, "source": source,
                **({"note": params.pop("window_note")} if "window_note" in params else {}),
            }

    inverted, params["inverted_because"] = presentation_inversion(photometric, view.get("PresentationLUTShape"))
    params["inverted"] = inverted
    return invert(pixels) if inverted else pixels


def presentation_inversion(photometric: str, shape: Any) -> tuple[bool, str]:
    """Whether the windowed 8-bit image is inverted, and the reason to record in `inverted_because`.

    The Presentation LUT Shape, when present, is the last stage of the grayscale pipeline and decides
    (PS3.3 C.7.6.1 General Image Module: IDENTITY "output is in P-Values", INVERSE "output after
    inversion is in P-Values"; PS3.4 N.2.1.4). The same attribute says IDENTITY "shall be used" with
    MONOCHROME2 and INVERSE with MONOCHROME1, so MONOCHROME1 + INVERSE is one inversion, not two.
    Without a shape, MONOCHROME1 ("minimum sample value ... displayed as white after any VOI gray
    scale transformations", C.7.6.3.1.2) inverts.
    The non-conformant MONOCHROME1 + IDENTITY is shown as the shape says, uninverted, as dcmtk's
    DiMonoImage (`dcmj2pnm` 3.6.7, checked), highdicom's `_CombinedPixelTransform` and dcm4che's
    renderer (unless `--noshape`) do; cornerstone3D/OHIF read Photometric Interpretation only.
    A shape other than IDENTITY/INVERSE (LIN OD is for printers) is ignored, as dcmtk does.
    """
    value = str(shape or "").strip().upper()
    if value == "INVERSE":
        if photometric == "MONOCHROME1":
            return True, "MONOCHROME1 with PresentationLUTShape INVERSE (the same inversion, applied once)"
        return True, "PresentationLUTShape INVERSE"
    if value == "IDENTITY":
        if photometric == "MONOCHROME1":
            return False, "not inverted: PresentationLUTShape IDENTITY overrides MONOCHROME1 (as dcmtk, highdicom)"
        return False, "not inverted: MONOCHROME2 with PresentationLUTShape IDENTITY"
    ignored = f" (PresentationLUTShape {value!r} is not a softcopy shape and was ignored)" if value else ""
    if photometric == "MONOCHROME1":
        return True, "MONOCHROME1" + ignored
    return False, "not inverted: MONOCHROME2" + ignored


def pixel_shape(view: Dataset) -> tuple[str, float, float] | None:
    """(attribute, vertical, horizontal) size of a pixel from the first of `PIXEL_SHAPE_ATTRIBUTES`
    present, or None. A present but unusable value (one number, zero, negative, text) is a ValueError:
    the next attribute is not consulted, because the file did say something about its pixels.
    """
    for keyword in PIXEL_SHAPE_ATTRIBUTES:
        value = view.get(keyword)
        if value is None or value == "":
            continue
        values = list(value) if isinstance(value, (MultiValue, list, tuple)) else [value]
        written = "\\".join(str(v) for v in values)  # as DICOM writes multiple values
        try:
            vertical, horizontal = (float(v) for v in values)
        except (TypeError, ValueError):
            raise ValueError(f"{keyword} {written} is not two numbers") from None
        if not (vertical > 0 and horizontal > 0):
            raise ValueError(f"{keyword} {written} is not positive")
        return keyword, vertical, horizontal
    return None


def _square_pixels(pixels: np.ndarray, view: Dataset, is_mask: bool, params: dict, enabled: bool = True) -> np.ndarray:
    """Enlarge the coarser axis so pixels are square; record the decision in `params["square_pixels"]`.

    Sizes are recorded as [width, height] like the rest of the report. When the grid changes, the
    reader's geometry gets a `square_pixels` step from the stored grid: `mmbu.build.layouts.frames` maps
    boxes and masks given in stored-pixel coordinates through it (and any `max_size` resize after it),
    so they land on the same anatomy. With `enabled` False (`ConvertOptions.square_pixels`)
    the stored grid is kept and the record says it was turned off, with what the header says.
    """
    off = {"applied": False, "note": SQUARE_PIXELS_OFF_NOTE}
    try:
        shape = pixel_shape(view)
    except ValueError as error:
        params["square_pixels"] = off if not enabled else {"applied": False, "note": f"{error}; pixels kept as stored"}
        return pixels
    if shape is None:
        if not enabled:
            params["square_pixels"] = off
        return pixels
    keyword, vertical, horizontal = shape
    height, width = pixels.shape[:2]
    record: dict[str, Any] = {
        "source": keyword,
        ("ratio" if keyword == "PixelAspectRatio" else "spacing_mm"): [vertical, horizontal],
        "from_size": [width, height],
    }
    params["square_pixels"] = record
    if not enabled:
        record.update(off)
        return pixels
    try:
        size = square_pixel_size(height, width, vertical, horizontal)
    except ValueError as error:
        record.update(applied=False, note=f"{error}; pixels kept as stored")
        return pixels
    if size is None:
        record.update(applied=False, note="square within 1%")
        return pixels
    pixels = resize_to(pixels, *size, is_mask=is_mask)
    record.update(applied=True, to_size=[size[1], size[0]], resample="nearest" if is_mask else "lanczos")
    return pixels


def _file_voi(values: np.ndarray, view: Dataset, index: int, params: dict, path: Path) -> np.ndarray | None:
    """Apply the file's VOI LUT (preferred) or window number `index`; None when the file has none usable."""
    luts = view.get("VOILUTSequence") or []
    has_lut = bool(luts) and all(key in luts[0] for key in ("LUTDescriptor", "LUTData"))
    has_window = view.get("WindowCenter") is not None and view.get("WindowWidth") is not None
    if not (has_lut or has_window):
        return None
    count = len(luts) if has_lut else _multiplicity(view["WindowCenter"].value)
    if index >= count:
        raise ConversionError(
            f"window index {index} was requested but {path} has {count} {'VOI LUT(s)' if has_lut else 'window(s)'}"
        )
    if not has_lut:
        center, width = _pick(view["WindowCenter"].value, index), _pick(view["WindowWidth"].value, index)
        function = str(view.get("VOILUTFunction", "LINEAR")).strip().upper() or "LINEAR"
        explanation = view.get("WindowCenterWidthExplanation")
        params["window"] = {
            "center": center, "width": width, "function": function, "source": "file window",
            "index": index, "count": count, "explanation": str(_pick(explanation, index)) if explanation else None,
        }
        if function == "LINEAR" and width >= 1:
            # pydicom's LINEAR formula straight to 8 bits (same bounds, same slope; no float64 round trip
            # through the stored range). `test_linear_window_matches_pydicom` keeps the two in step.
            lo, hi = center_width_to_bounds(center, width)
            return window_to_uint8(values, lo, hi)
    elif np.issubdtype(values.dtype, np.floating) and np.all(values == np.rint(values)):
        values = values.astype(np.int64)  # LUT indices must be integers (float input is warned against)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            voi = apply_voi_lut(values, view, index=index, prefer_lut=True)
    except (ValueError, NotImplementedError, IndexError) as error:
        params.pop("window", None)
        params["window_note"] = f"the file's VOI could not be applied ({_first_line(error)})"
        return None
    if has_lut:
        descriptor = luts[index].LUTDescriptor
        bits = voi_lut_output_bits(int(descriptor[2]), int(np.max(voi_lut_data(luts[index], view))))
        y_lo, y_hi = 0.0, float(2**bits - 1)
        params["window"] = {
            "source": "file VOI LUT", "index": index, "count": count,
            "lut_entries": int(descriptor[0] or 65536), "lut_output_range": [y_lo, y_hi],
            "lut_bits": bits, "lut_bits_declared": int(descriptor[2]),
            "explanation": str(luts[index].get("LUTExplanation", "")) or None,
        }
    else:
        y_lo, y_hi = _window_output_range(view, index)
    return _scale_output(voi, y_lo, y_hi)


def voi_lut_data(item: Dataset, view: Dataset) -> np.ndarray:
    """The LUT entries of one VOI LUT item, read through pydicom (identity input covers every entry)."""
    entries = item.LUTDescriptor[0] or 65536
    first_mapped = item.LUTDescriptor[1]
    single = Dataset()
    single.VOILUTSequence = [item]
    single.file_meta = view.file_meta
    single.set_original_encoding(*view.original_encoding)
    return apply_voi_lut(np.arange(first_mapped, first_mapped + entries, dtype=np.int64), single)


def voi_lut_output_bits(declared_bits: int, lut_max: int) -> int:
    """Bits of a VOI LUT's output range 0..2**bits-1, which maps onto black..white (PS3.3 C.11.2.1.1).

    The descriptor's third value is the standard's answer, and a LUT that stays inside part of that
    range (say 500..3500 of 12 bits) is meant to look that way, not to be stretched to full contrast.
    Many CR/DX files declare 16 bits for 12-bit data, though, which taken literally is nearly black:
    like dcmtk's `--ignore-vlut-depth`, the depth is lowered to what the largest entry needs.
    """
    needed = max(1, int(lut_max).bit_length())
    return min(declared_bits, needed) if declared_bits > 0 else needed


def _window_output_range(view: Dataset, index: int) -> tuple[float, float]:
    """pydicom's window output range, found by windowing -inf and +inf (always below / above the window)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ends = apply_voi_lut(np.array([-np.inf, np.inf]), view, index=index, prefer_lut=False)
    return float(ends[0]), float(ends[1])


def _scale_output(voi: np.ndarray, y_lo: float, y_hi: float) -> np.ndarray:
    """Map the VOI output range onto 0..255; a reversed range (negative slope) keeps its direction."""
    if y_hi < y_lo:
        return window_to_uint8(-np.asarray(voi, dtype=np.float64), -y_lo, -y_hi)
    return window_to_uint8(voi, y_lo, y_hi)


def _multiplicity(value: Any) -> int:
    return len(value) if isinstance(value, (MultiValue, list, tuple)) else 1


def _pick(value: Any, index: int) -> Any:
    picked = value[index] if _multiplicity(value) > 1 else value
    return float(picked) if isinstance(picked, (int, float)) else picked


def _padding_mask(stored: np.ndarray, view: Dataset) -> np.ndarray | None:
    """Pixels holding the Pixel Padding Value (outside the scanned area) stay out of the percentiles."""
    padding = view.get("PixelPaddingValue")
    if padding is None:
        return None
    if isinstance(padding, bytes):
        return None
    return stored == padding


def _to_srgb(rgb: np.ndarray, header: Dataset, params: dict) -> np.ndarray:
    """Apply the file's ICC Profile (colour photography, microscopy, ophthalmology) to reach sRGB."""
    if not header.get("ICCProfile"):
        return rgb
    try:
        apply_icc_profile(rgb, header, color_space="sRGB")  # in place
    except Exception as error:  # a damaged profile must not cost the image: keep stored colours, say so
        params["icc"] = f"ICC profile unreadable, colours kept as stored ({_first_line(error)})"
        return rgb
    params["icc"] = "ICC profile applied, converted to sRGB"
    return rgb


def _palette_to_rgb(stored: np.ndarray, view: Dataset, path: Path) -> np.ndarray:
    try:
        rgb = apply_color_lut(stored, view)
    except (ValueError, AttributeError, KeyError) as error:
        raise ConversionError(f"{path} is PALETTE COLOR but its palette cannot be applied ({_first_line(error)})") from None
    nominal_bits = int(view.RedPaletteColorLookupTableDescriptor[2])
    return _fixed_range_to_8bit(rgb[..., :3], nominal_bits)


def _rgb_to_8bit(stored: np.ndarray, header: Dataset, path: Path) -> np.ndarray:
    if stored.ndim != 3 or stored.shape[2] != 3:
        raise ConversionError(f"{path} is a colour image but its frame has shape {stored.shape}")
    return _fixed_range_to_8bit(stored, int(header.get("BitsStored") or 8))


def _fixed_range_to_8bit(colour: np.ndarray, bits: int) -> np.ndarray:
    """Colour samples keep their meaning: scale the full nominal range 0..2**bits-1 onto 0..255."""
    if colour.dtype == np.uint8 and bits <= 8:
        return np.ascontiguousarray(colour)
    top = float(2**bits - 1)
    return np.clip(np.rint(colour.astype(np.float64) * (255.0 / top)), 0, 255).astype(np.uint8)

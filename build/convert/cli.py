"""`mmbu convert`: medical and microscopy images to PNG, one report line per source (docs/architecture.md §3.2)."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from mmbu.build.convert.base import ConvertOptions
from mmbu.build.convert.batch import REPORT_NAME, convert_paths
from mmbu.core.cli import ExitCode, InvalidInput




def _parse_slice(value: str) -> int | str:
    if value in ("middle", "mask_max_area"):
        return value
    if value.isdigit():
        return int(value)
    raise click.BadParameter(f"{value!r} is not a slice index, 'middle' or 'mask_max_area'")


def _parse_index_or_middle(value: str) -> int | str:
    if value == "middle":
        return value
    if value.isdigit():
        return int(value)
    raise click.BadParameter(f"{value!r} is not an index (0, 1, ...) or 'middle'")


def _parse_series(value: str) -> int | str:
    return int(value) if value.isdigit() else value


def _parse_window(value: str) -> tuple[float, float]:
    try:
        center, width = (float(part) for part in value.split(","))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not CENTER,WIDTH (for example 40,400)") from None
    if width <= 0:
        raise click.BadParameter(f"the window width must be positive, got {width:g}")
    return center, width


def _callback(parse):
    return lambda ctx, param, value: None if value is None else parse(value)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("sources", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder for the PNGs (created if missing).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path),
              help=f"JSON-lines report, one line per source [default: OUT/{REPORT_NAME}].")
@click.option("--as-mask", is_flag=True, help="Sources are label masks: values kept, never windowed, nearest resize.")
@click.option("--max-size", type=click.IntRange(min=1), help="Longest output side in pixels (whole slides default to 2048).")
@click.option("--frame", default="middle", show_default=True, callback=_callback(_parse_index_or_middle),
              help="Frame of a multi-frame DICOM / TIFF page / 4-D NIfTI, MetaImage or NRRD volume / MRC volume "
                   "stack / video: 0-based index or 'middle'.")
@click.option("--slice", "slice_", default="middle", show_default=True, callback=_callback(_parse_slice),
              help="NIfTI/MetaImage/NRRD slice along --axis, MRC section (before --z): index, 'middle' or "
                   "'mask_max_area' (needs --slice-mask).")
@click.option("--axis", type=click.IntRange(0, 2), default=2, show_default=True,
              help="NIfTI axis after reorientation to RAS: 0 sagittal, 1 coronal, 2 axial.")
@click.option("--slice-mask", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Mask volume whose largest-area slice is taken with --slice mask_max_area.")
@click.option("--window", callback=_callback(_parse_window), metavar="C,W",
              help="Window CENTER,WIDTH overriding the file's window (e.g. 40,400 for CT soft tissue).")
@click.option("--window-index", type=click.IntRange(min=0), default=0, show_default=True,
              help="Which of a DICOM file's alternative windows / VOI LUTs to use.")
@click.option("--square-pixels/--no-square-pixels", default=True, show_default=True,
              help="Resample non-square pixels (DICOM Pixel Spacing / Imager Pixel Spacing / Pixel Aspect Ratio, "
                   "NIfTI voxel spacing) to square ones; --no-square-pixels keeps the stored grid.")
@click.option("--series", default="0", show_default=True, callback=_callback(_parse_series),
              help="Series of a CZI/LIF/ND2/VSI file (scene, image, position): 0-based index or its name.")
@click.option("--z", "z_plane", default="middle", show_default=True, callback=_callback(_parse_index_or_middle),
              help="Z plane of a CZI/LIF/ND2/VSI series, section of an MRC volume: 0-based index or 'middle'.")
@click.option("--t", "time_point", default="middle", show_default=True, callback=_callback(_parse_index_or_middle),
              help="Time point of a CZI/LIF/ND2/VSI series: 0-based index or 'middle'.")
@click.option("--time", "frame_time", type=click.FloatRange(min=0), metavar="SECONDS",
              help="Video: the frame shown at this time (first frame at or after it); overrides --frame.")
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True, help="Worker processes.")
def convert(sources, out_dir, report_path, as_mask, max_size, frame, slice_, axis, slice_mask, window, window_index,
            square_pixels, series, z_plane, time_point, frame_time, jobs):
    """Convert DICOM, NIfTI, MetaImage, NRRD, whole-slide, OME-TIFF/TIFF, CZI, LIF, ND2, VSI, video
    (MP4/AVI/MKV) and JPEG/PNG/... SOURCES to 8-bit PNGs.

    A SOURCE is a file, a folder to walk, or a folder holding one MRXS slide. Formats are
    recognised from content, not the extension. Each source gives OUT/<stem>.png (name clashes get
    -2, -3, ...) and one JSON line in the report saying what was done or why it failed.

    Exit status: 0 all converted, 1 some sources failed (see the report), 2 bad usage.
    """
    if slice_ == "mask_max_area" and slice_mask is None and not as_mask:
        raise click.UsageError("--slice mask_max_area needs --slice-mask MASK (or --as-mask to pick from the mask itself)")
    options = ConvertOptions(
        as_mask=as_mask, max_size=max_size, frame=frame, slice=slice_, axis=axis, window=window,
        window_index=window_index, slice_mask=slice_mask, square_pixels=square_pixels,
        series=series, z=z_plane, t=time_point, frame_time=frame_time,
    )
    try:
        records = convert_paths(sources, out_dir, options, report_path, jobs=jobs, show_progress=sys.stderr.isatty())
    except OSError as exc:  # a full disk or a read-only folder: `mmbu` says it in one sentence naming the folder
        exc.filename = exc.filename or str(out_dir)
        raise
    if not records:
        raise InvalidInput(f"no files to convert were found in {', '.join(map(str, sources))}")
    failed = [record for record in records if record["status"] != "ok"]
    report = report_path or out_dir / REPORT_NAME
    click.echo(f"converted {len(records) - len(failed)} of {len(records)} source(s) into {out_dir}; report: {report}")
    for record in failed[:10]:
        click.echo(f"  failed: {record['error']}", err=True)
    if len(failed) > 10:
        click.echo(f"  ... and {len(failed) - 10} more failures, see {report}", err=True)
    raise SystemExit(ExitCode.ITEMS_FAILED if failed else ExitCode.OK)

"""Independent references for the image and box audit (tests/benchmark_eval/test_images_audit.py).

Nothing here imports the package's image or box helpers: the sizes, paddings, outlines and box
conventions are recomputed from the models' published rules with numpy, Pillow and fractions, so a
test compares the package against a second implementation, not against itself.
"""
from __future__ import annotations

import io
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from support.eval_release import SCHEMA_FIELDS, make_rows

GREEN = (0, 255, 0)


def png_bytes(image: Image.Image, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", **options)
    return buffer.getvalue()


def write_task(root: Path, task: str, rows: list[dict]) -> Path:
    """``root/data/<task>/train-00000-of-00001.parquet`` with `rows` over a fixture row of that task (so every
    column is present as the build writes it); a row gives at least ``sample_id`` and ``image`` (PNG bytes)."""
    template = make_rows(task, 1, (64, 48), seed=0)[0]
    full = []
    for row in rows:
        merged = {**template, **row}
        merged["image"] = {"bytes": row["image"], "path": f"{row['sample_id']}.png"}
        if "mask" in row:
            merged["mask"] = None if row["mask"] is None else {"bytes": row["mask"], "path": None}
        full.append(merged)
    folder = Path(root) / "data" / task
    folder.mkdir(parents=True, exist_ok=True)
    schema = pa.schema(SCHEMA_FIELDS)
    pq.write_table(pa.Table.from_pylist([{n: r[n] for n, _ in SCHEMA_FIELDS} for r in full], schema=schema),
                   folder / "train-00000-of-00001.parquet")
    return Path(root)


def decode(data: bytes) -> np.ndarray:
    """What a server hands the processor: the sent PNG/JPEG read as RGB."""
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


# --- sizes --------------------------------------------------------------------------------------

def qwen25_smart_resize(height: int, width: int, factor: int, min_pixels: int,
                        max_pixels: int) -> tuple[int, int] | None:
    """Qwen's published rule (qwen-vl-utils vision_process.smart_resize, transformers' Qwen2-VL image processor):
    round each side to a multiple of `factor`; over max_pixels: floor both by sqrt(h*w/max); under min_pixels:
    ceil both by sqrt(min/(h*w)). None for an aspect ratio above 200, which the processor refuses."""
    if max(height, width) / min(height, width) > 200:
        return None
    h_bar = max(factor, factor * round(height / factor))
    w_bar = max(factor, factor * round(width / factor))
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = max(factor, factor * math.floor(height / beta / factor))
        w_bar = max(factor, factor * math.floor(width / beta / factor))
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = factor * math.ceil(height * beta / factor)
        w_bar = factor * math.ceil(width * beta / factor)
    return h_bar, w_bar


def expected_frames(entry, w: int, h: int):
    """(content (w, h), sent (w, h), offset (x, y)) for an original of w x h, or None when the model cannot take it.

    Qwen2.5-VL: smart_resize, and the server must keep what it receives (a fixed point), else it is refused.
    Others: the aspect-kept downscale the registry declares, in exact arithmetic: to max_side the long side
    becomes max_side exactly and the short side floor(short * max_side / long); to max_pixels both sides are
    floored after scaling by sqrt(max_pixels / (w h)). Padded models: a centred square, the spare pixel after
    (expand2square pastes at d // 2; MedGemma's np.pad puts d // 2 before).
    """
    resize = entry.box_format.resize
    limits = entry.image
    if resize != "none":
        first = qwen25_smart_resize(h, w, resize.factor, resize.min_pixels, resize.max_pixels)
        if first is None:
            return None
        again = qwen25_smart_resize(first[0], first[1], resize.factor, resize.min_pixels, resize.max_pixels)
        if again != first:
            return None
        content = (first[1], first[0])
    else:
        side = Fraction(limits.max_side, max(w, h)) if limits.max_side and max(w, h) > limits.max_side else None
        pixels = Fraction(limits.max_pixels, w * h) if limits.max_pixels and w * h > limits.max_pixels else None
        if side is None and pixels is None:
            content = (w, h)
        elif pixels is None or (side is not None and side * side <= pixels):
            content = (max(1, w * limits.max_side // max(w, h)), max(1, h * limits.max_side // max(w, h)))
        else:
            scale = math.sqrt(pixels)
            content = (max(1, math.floor(w * scale)), max(1, math.floor(h * scale)))
    pad = limits.pad_to_square
    if pad == "none":
        return content, content, (0, 0)
    square = max(content)
    centred = pad != "top_left" and pad.position == "center"
    offset = ((square - content[0]) // 2, (square - content[1]) // 2) if centred else (0, 0)
    return content, (square, square), offset


# --- outlines -------------------------------------------------------------------------------------

def box_outline(canvas: tuple[int, int], content: tuple[int, int], offset: tuple[int, int], image_size: tuple[int, int],
                box: tuple[float, float, float, float], width: int = 3) -> np.ndarray:
    """The green pixels the documented ROI gives for `box` (original pixels, x2/y2 exclusive): a ring `width` px wide
    just outside the smallest run of resized pixels that holds any part of the box, clipped to the resized image."""
    kx, ky = Fraction(content[0], image_size[0]), Fraction(content[1], image_size[1])
    x1, y1 = math.floor(Fraction(box[0]) * kx), math.floor(Fraction(box[1]) * ky)
    x2, y2 = math.ceil(Fraction(box[2]) * kx), math.ceil(Fraction(box[3]) * ky)
    ys, xs = np.mgrid[0:content[1], 0:content[0]]
    outer = (xs >= x1 - width) & (xs < x2 + width) & (ys >= y1 - width) & (ys < y2 + width)
    inner = (xs >= x1) & (xs < x2) & (ys >= y1) & (ys < y2)
    ring = np.zeros((canvas[1], canvas[0]), bool)
    ring[offset[1]:offset[1] + content[1], offset[0]:offset[0] + content[0]] = outer & ~inner
    return ring


def box_inside(canvas, content, offset, image_size, box) -> np.ndarray:
    """The resized pixels holding any part of `box` (which the outline must never paint)."""
    kx, ky = Fraction(content[0], image_size[0]), Fraction(content[1], image_size[1])
    x1, y1 = math.floor(Fraction(box[0]) * kx), math.floor(Fraction(box[1]) * ky)
    x2, y2 = math.ceil(Fraction(box[2]) * kx), math.ceil(Fraction(box[3]) * ky)
    inside = np.zeros((canvas[1], canvas[0]), bool)
    inside[offset[1] + y1:offset[1] + y2, offset[0] + x1:offset[0] + x2] = True
    return inside


def _touching(n_source: int, n_target: int) -> np.ndarray:
    """touch[s, t]: target pixel t (of n_target over the same extent) overlaps source pixel s."""
    touch = np.zeros((n_source, n_target), bool)
    for s in range(n_source):
        first = math.floor(Fraction(s * n_target, n_source))
        last = math.ceil(Fraction((s + 1) * n_target, n_source)) - 1
        touch[s, first:last + 1] = True
    return touch


def mask_region_resized(mask: np.ndarray, content: tuple[int, int]) -> np.ndarray:
    """The resized pixels that hold any part of the mask (each source pixel marks every target pixel it overlaps)."""
    ys, xs = np.nonzero(mask.any(axis=1))[0], np.nonzero(mask.any(axis=0))[0]
    region = np.zeros((content[1], content[0]), bool)
    if len(ys) == 0:
        return region
    rows, cols = _touching(mask.shape[0], content[1])[ys], _touching(mask.shape[1], content[0])[xs]
    # counts of overlapping source pixels: whole numbers far below 2**53, exact in float64, whose product BLAS does
    # (NumPy's integer matrix product has no BLAS and took seconds here)
    hit = rows.T.astype(np.float64) @ mask[np.ix_(ys, xs)].astype(np.float64) @ cols.astype(np.float64)
    return hit > 0


def ring_l1(region: np.ndarray, width: int = 3) -> np.ndarray:
    """Pixels outside `region` within city-block distance `width` of it (a cross-shaped dilation `width` times)."""
    h, w = region.shape
    near = np.zeros_like(region)
    for dy in range(-width, width + 1):
        for dx in range(-(width - abs(dy)), width - abs(dy) + 1):
            shifted = np.zeros_like(region)
            shifted[max(dy, 0):h + min(dy, 0), max(dx, 0):w + min(dx, 0)] = \
                region[max(-dy, 0):h + min(-dy, 0), max(-dx, 0):w + min(-dx, 0)]
            near |= shifted
    return near & ~region


# --- box conventions ------------------------------------------------------------------------------

def perfect_answer(entry, image_size, content, sent, offset, box, *, integers: bool) -> list[float]:
    """`box` (original pixels) as a perfect model would write it in the registry's declared convention, computed
    from the frames above: pixels of the sent image (Qwen2.5-VL: already smart-resized), or 0-1000 / 0-1 of the
    sent canvas (padded square included), x- or y-first. `integers`: rounded as models write them (0-1: 3 places)."""
    kx, ky = content[0] / image_size[0], content[1] / image_size[1]
    xs = [box[0] * kx + offset[0], box[2] * kx + offset[0]]
    ys = [box[1] * ky + offset[1], box[3] * ky + offset[1]]
    scale = entry.box_format.scale
    if scale == "norm1000":
        xs, ys = [x / sent[0] * 1000 for x in xs], [y / sent[1] * 1000 for y in ys]
    elif scale == "norm1":
        xs, ys = [x / sent[0] for x in xs], [y / sent[1] for y in ys]
    values = [xs[0], ys[0], xs[1], ys[1]]
    if entry.box_format.order == "yxyx":
        values = [ys[0], xs[0], ys[1], xs[1]]
    if integers:
        values = [round(v, 3) for v in values] if scale == "norm1" else [float(round(v)) for v in values]
    return values


def unit_in_original(entry, image_size, content, sent) -> float:
    """Half of one step of the model's convention, in original pixels (the most rounding can move a corner)."""
    per_x, per_y = image_size[0] / content[0], image_size[1] / content[1]
    step = {"pixel": (1, 1), "norm1000": (sent[0] / 1000, sent[1] / 1000),
            "norm1": (sent[0] / 1000, sent[1] / 1000)}[entry.box_format.scale]  # 0-1 written to 3 places
    return 0.5 * max(step[0] * per_x, step[1] * per_y)


def family_reply(entry, values: list[float], target: str) -> str:
    """A reply in the style of the entry's family, with its reasoning block where it has one."""
    a, b, c, d = (str(int(v)) if float(v).is_integer() else repr(float(v)) for v in values)
    family = entry.family
    if family in ("qwen2_5_vl", "qwen3_vl"):
        text = f'```json\n[\n  {{"bbox_2d": [{a}, {b}, {c}, {d}], "label": "{target}"}}\n]\n```'
    elif family == "internvl":
        text = f"<ref>{target}</ref><box>[[{a}, {b}, {c}, {d}]]</box>"
    elif family == "gemma3" and entry.box_format.order == "yxyx":
        text = f'```json\n[{{"box_2d": [{a}, {b}, {c}, {d}], "label": "{target}"}}]\n```'
    elif family == "llava":
        text = f"The {target} is at [{a}, {b}, {c}, {d}]."
    else:
        text = f"Looking at the image, the {target} is in the upper part.\nAnswer: [{a}, {b}, {c}, {d}]"
    if entry.chat.thinking_tags:
        opening, closing = entry.chat.thinking_tags
        text = f"{opening}thought\nA first guess would be [1, 2, 3, 4].{closing}{text}"
    return text

"""`mmbu release preview`: a static HTML review sheet of a built release, for the round-3 expert check and for a
maintainer before publishing.

For every dataset and task it samples `per_dataset` rows (seeded: the same release and seed give the same rows) and
shows each as a reviewer needs it: the image as a model receives it (at most `PREVIEW_SIDE` pixels on its long
side, the box or mask outline drawn after resizing exactly as the evaluation draws it, `mmbu.core.drawing`), for
closed detection a second copy with every option's box in its own colour and letter, the questions (open and closed
forms), the lettered options with the gold one marked, the gold answer and its accepted aliases, and the metadata.

The page is one `index.html` with the images as PNG files in `img/` beside it: no server, no script. Every text
from the release is HTML-escaped and every file name is made from a hash, so a hostile release cannot inject markup
or write outside the folder. The folder is written aside and put in place whole.
"""
from __future__ import annotations

import hashlib
import html
import io
import os
import random
import re
import shutil
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from PIL import Image, ImageDraw, ImageFont

from mmbu.core.boxes import Box
from mmbu.core.drawing import ROI_COLOUR_NAME, draw_boxes, draw_mask_outline, mask_region
from mmbu.core.files import replace_folder, write_text_atomic
from mmbu.core.release import CLOSED_QUESTION_COLUMNS, METADATA_FIELDS, QUESTION_COLUMNS, TASK_TITLES, TASKS, Task

PREVIEW_SIDE = 1024
REVIEW_MIN_SIDE = 512  # closed detection's options are drawn on a copy at least this large
DEFAULT_PER_DATASET = 3
# option colours of closed detection: far apart in hue and none of them the ROI's green
OPTION_COLOURS = ((230, 25, 75), (255, 200, 0), (0, 130, 255), (255, 110, 0), (190, 60, 255), (0, 220, 220),
                  (255, 60, 200), (150, 100, 40))
PAGE = "index.html"
IMAGES = "img"
BOX_TEXT = re.compile(r"^\s*\[\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\]\s*$")
ROW_COLUMNS = ("sample_id", "dataset_id", "image", "mask", "boxes", "target", "answer", "options", "answer_aliases",
               *QUESTION_COLUMNS.values(), *CLOSED_QUESTION_COLUMNS.values(), *METADATA_FIELDS, "license",
               "question_version")


class PreviewError(Exception):
    """The release folder cannot be previewed (missing, or not a release); the message names it."""


@dataclass
class PreviewReport:
    page: Path
    rows: int
    failures: list[str] = field(default_factory=list)  # one sentence per row that could not be drawn


def task_shards(release_dir: Path) -> dict[str, list[Path]]:
    """The Parquet shards of each task config present in the release."""
    shards = {task: sorted((release_dir / "data" / task).glob("*.parquet")) for task in TASKS}
    shards = {task: files for task, files in shards.items() if files}
    if not shards:
        raise PreviewError(f"{release_dir}: no release here (no data/<task>/*.parquet; build one with mmbu build)")
    return shards


def sample_ids(shards: Mapping[str, Sequence[Path]], per_dataset: int, seed: int) -> dict[str, set[str]]:
    """Per task, the sample ids chosen: `per_dataset` per dataset, drawn by a generator seeded with the seed, the
    dataset and the task from the dataset's ids in sorted order (so neither shard order nor other datasets move
    them)."""
    chosen: dict[str, set[str]] = {}
    for task, files in shards.items():
        by_dataset: dict[str, list[str]] = defaultdict(list)
        for path in files:
            table = pq.read_table(path, columns=["sample_id", "dataset_id"])
            for sample, dataset in zip(*(table.column(c).to_pylist() for c in ("sample_id", "dataset_id"))):
                by_dataset[str(dataset)].append(str(sample))
        chosen[task] = set()
        for dataset, ids in by_dataset.items():
            rng = random.Random(f"{seed}\x1f{dataset}\x1f{task}")
            chosen[task] |= set(rng.sample(sorted(ids), min(per_dataset, len(ids))))
    return chosen


def read_rows(files: Iterable[Path], wanted: set[str]) -> list[dict[str, Any]]:
    """The chosen rows of one task, with their image bytes (only theirs are read)."""
    rows = []
    for path in files:
        names = pq.read_schema(path).names
        columns = [c for c in ROW_COLUMNS if c in names]
        table = pq.read_table(path, columns=columns, filters=[("sample_id", "in", sorted(wanted))])
        rows.extend(table.to_pylist())
    return rows


def _box(text: str) -> Box | None:
    match = BOX_TEXT.match(text)
    return tuple(float(v) for v in match.groups()) if match else None  # type: ignore[return-value]


def _resized(image: Image.Image) -> tuple[Image.Image, Fraction]:
    """The image as RGB, at most PREVIEW_SIDE on its long side, and the scale applied."""
    image = image.convert("RGB")
    scale = min(Fraction(1), Fraction(PREVIEW_SIDE, max(image.size)))
    if scale < 1:
        size = (max(1, int(image.width * scale)), max(1, int(image.height * scale)))
        image = image.resize(size, Image.Resampling.BICUBIC)
    return image, scale


def _scaled(box: Sequence[float], scale: Fraction) -> tuple[Fraction, ...]:
    return tuple(Fraction(v) * scale for v in box)


def model_view(row: Mapping[str, Any], task: str) -> tuple[Image.Image, Fraction]:
    """The image as a model receives it: resized, with the box or mask outlined as the evaluation draws it; and the
    scale from the release's pixels to its."""
    with Image.open(io.BytesIO(row["image"]["bytes"])) as opened:
        image, scale = _resized(opened)
    if task == Task.BOX_GROUNDED and row.get("boxes"):
        image = draw_boxes(image, [_scaled(b, scale) for b in row["boxes"]])  # type: ignore[misc]
    if task == Task.MASK_GROUNDED and row.get("mask") and row["mask"].get("bytes"):
        with Image.open(io.BytesIO(row["mask"]["bytes"])) as mask:
            image = draw_mask_outline(image, mask_region(mask.convert("L"), image.size))
    return image, scale


def options_view(image: Image.Image, row: Mapping[str, Any], scale: Fraction) -> Image.Image:
    """Closed detection's options on a copy (enlarged by a whole factor to at least REVIEW_MIN_SIDE pixels, so small
    images stay legible): each option's box in its own colour, its letter on a tab above it; the boxes are drawn
    last, so no tab hides one."""
    factor = max(1, -(-REVIEW_MIN_SIDE // max(image.size)))
    out = image.resize((image.width * factor, image.height * factor), Image.Resampling.NEAREST)
    scale *= factor
    draw = ImageDraw.Draw(out)
    font = ImageFont.load_default(size=max(12, max(out.size) // 45))
    placed = []
    for index, option in enumerate(row.get("options") or ()):
        box = _box(str(option))
        if box is not None:
            placed.append((OPTION_COLOURS[index % len(OPTION_COLOURS)], letter_of(index),
                           tuple(float(v) for v in _scaled(box, scale))))
    for colour, letter, (x1, y1, x2, y2) in placed:
        left, top, right, bottom = draw.textbbox((0, 0), letter, font=font)
        height = bottom - top + 4
        tab_y = y1 - height if y1 - height >= 0 else y2
        draw.rectangle([x1, tab_y, x1 + right - left + 4, tab_y + height], fill=colour)
        draw.text((x1 + 2 - left, tab_y + 2 - top), letter, fill=(0, 0, 0), font=font)
    for colour, _, (x1, y1, x2, y2) in placed:
        draw.rectangle([x1, y1, max(x1, x2 - 1), max(y1, y2 - 1)], outline=colour, width=2)
    return out


def letter_of(index: int) -> str:
    return chr(ord("A") + index) if index < 26 else str(index + 1)


def _file_name(sample_id: str, suffix: str) -> str:
    """A file name that no sample id can turn into a path outside the folder."""
    readable = re.sub(r"[^A-Za-z0-9_-]", "_", sample_id)[:60]
    return f"{readable}-{hashlib.sha256(sample_id.encode()).hexdigest()[:10]}{suffix}.png"


def _text(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _questions(row: Mapping[str, Any]) -> str:
    items = []
    for template, column in QUESTION_COLUMNS.items():
        closed = row.get(CLOSED_QUESTION_COLUMNS[template])
        name = template.replace("_", " ")
        items.append(f"<dt>{_text(name)}</dt><dd>{_text(row.get(column))}</dd>")
        if closed:
            items.append(f"<dt>{_text(name)}, closed form</dt><dd>{_text(closed)}</dd>")
    return "<dl class=questions>" + "".join(items) + "</dl>"


def _options(row: Mapping[str, Any], detection: bool) -> str:
    items = []
    for index, option in enumerate(row.get("options") or ()):
        gold = option == row.get("answer")
        swatch = ""
        if detection and _box(str(option)) is not None:
            r, g, b = OPTION_COLOURS[index % len(OPTION_COLOURS)]
            swatch = f'<span class=swatch style="background:rgb({r},{g},{b})"></span>'
        mark = " <strong>(gold)</strong>" if gold else ""
        items.append(f"<li{' class=gold' if gold else ''}>{swatch}{_text(letter_of(index))}. {_text(option)}{mark}</li>")
    return "<ol class=options>" + "".join(items) + "</ol>"


def _metadata(row: Mapping[str, Any]) -> str:
    fields = [*METADATA_FIELDS, "license", "question_version"]
    cells = "".join(f"<tr><th>{_text(name)}</th><td>{_text(row.get(name))}</td></tr>" for name in fields if name in row)
    return f"<details><summary>Metadata</summary><table>{cells}</table></details>"


def _card(row: Mapping[str, Any], task: str, images: Sequence[tuple[str, str]]) -> str:
    detection = task == Task.DETECTION
    figures = "".join(f'<figure><img src="{IMAGES}/{_text(name)}" alt="{_text(caption)}" loading="lazy">'
                      f"<figcaption>{_text(caption)}</figcaption></figure>" for name, caption in images)
    aliases = ", ".join(str(a) for a in row.get("answer_aliases") or ())
    target = f"<p><b>Target:</b> {_text(row.get('target'))}</p>" if detection else ""
    return (f"<article><div class=figures>{figures}</div><div class=text>"
            f"<p class=id>{_text(row.get('sample_id'))}</p>{target}{_questions(row)}"
            f"<h4>Options (closed form)</h4>{_options(row, detection)}"
            f"<p><b>Gold answer:</b> {_text(row.get('answer'))}</p>"
            f"<p><b>Accepted open answers besides it:</b> {_text(aliases) or 'none'}</p>"
            f"{_metadata(row)}</div></article>")


STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1400px; padding: 0 1em; color: #222; }
h2 { border-top: 2px solid #ccc; padding-top: .8em; }
article { display: flex; gap: 1.5em; border-bottom: 1px solid #eee; padding: 1em 0; }
.figures { display: flex; gap: .5em; flex: 0 0 auto; }
figure { margin: 0; } figure img { max-width: 420px; max-height: 420px; min-width: 240px; border: 1px solid #ccc;
  image-rendering: pixelated; }
figcaption { font-size: 12px; color: #555; } .text { flex: 1 1 auto; min-width: 0; }
.id { font-family: monospace; color: #666; margin: 0; }
dl.questions dt { font-weight: 600; margin-top: .4em; } dl.questions dd { margin-left: 1em; }
ol.options { list-style: none; padding-left: 1em; } li.gold { background: #e8f5e9; }
.swatch { display: inline-block; width: .9em; height: .9em; margin-right: .4em; vertical-align: middle; }
table { border-collapse: collapse; } th, td { text-align: left; padding: 2px 8px; border-bottom: 1px solid #eee; }
.failure { color: #b00020; }
"""


def write_preview(release_dir: str | Path, out_dir: str | Path, per_dataset: int = DEFAULT_PER_DATASET,
                  seed: int = 0) -> PreviewReport:
    """Write the review sheet of `release_dir` into `out_dir` (see the module's description). `out_dir` must be
    absent, empty or an earlier sheet: it is replaced whole."""
    release_dir, out_dir = Path(release_dir), Path(out_dir)
    if per_dataset < 1:
        raise PreviewError(f"--per-dataset {per_dataset}: at least one row per dataset and task")
    shards = task_shards(release_dir)
    if out_dir.exists() and (not out_dir.is_dir() or (any(out_dir.iterdir()) and not (out_dir / PAGE).is_file())):
        raise PreviewError(f"{out_dir}: not empty and not a review sheet; choose a new folder (it is replaced whole)")
    chosen = sample_ids(shards, per_dataset, seed)
    staging = out_dir.with_name(f".{out_dir.name}.preview-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / IMAGES).mkdir(parents=True)
    sections: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    names: dict[str, str] = {}
    failures: list[str] = []
    count = 0
    try:
        for task, files in shards.items():
            for row in sorted(read_rows(files, chosen[task]), key=lambda r: (str(r["dataset_id"]), str(r["sample_id"]))):
                dataset = str(row["dataset_id"])
                names.setdefault(dataset, str(row.get("dataset_name") or dataset))
                try:
                    images = _images(row, task, staging / IMAGES)
                except (OSError, ValueError, SyntaxError, Image.DecompressionBombError, TypeError, KeyError) as exc:
                    failures.append(f"{dataset} {row.get('sample_id')} ({task}): the image cannot be drawn ({exc})")
                    sections[dataset][task].append(f"<p class=failure>{_text(failures[-1])}</p>")
                    continue
                sections[dataset][task].append(_card(row, task, images))
                count += 1
        write_text_atomic(staging / PAGE, _page(release_dir, sections, names, per_dataset, seed, count, failures),
                          durable=False)
        replace_folder(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return PreviewReport(out_dir / PAGE, count, failures)


def _images(row: Mapping[str, Any], task: str, folder: Path) -> list[tuple[str, str]]:
    """The row's picture files (written into `folder`): (file name, caption) each."""
    sample = str(row["sample_id"])
    seen, scale = model_view(row, task)
    roi = {Task.BOX_GROUNDED: f"the box outlined in {ROI_COLOUR_NAME}",
           Task.MASK_GROUNDED: f"the region outlined in {ROI_COLOUR_NAME}"}.get(task)
    files = [(_file_name(sample, ""), "as the model sees it" + (f", {roi}" if roi else ""))]
    seen.save(folder / files[0][0])
    if task == Task.DETECTION:
        files.append((_file_name(sample, "-options"), "the closed options' boxes, each in its colour (not shown "
                                                      "to the model)"))
        options_view(seen, row, scale).save(folder / files[1][0])
    return files


def _page(release_dir: Path, sections: Mapping[str, Mapping[str, list[str]]], names: Mapping[str, str],
          per_dataset: int, seed: int, count: int, failures: Sequence[str]) -> str:
    toc = "".join(f'<li><a href="#{_anchor(d)}">{_text(d)}</a> — {_text(names[d])}</li>' for d in sorted(sections))
    body = []
    for dataset in sorted(sections):
        body.append(f'<h2 id="{_anchor(dataset)}">{_text(dataset)} — {_text(names[dataset])}</h2>')
        for task in TASKS:
            if sections[dataset].get(task):
                body.append(f"<h3>{_text(TASK_TITLES[task])}</h3>" + "".join(sections[dataset][task]))
    problems = "".join(f"<li class=failure>{_text(f)}</li>" for f in failures)
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f"<title>MMBU review sheet: {_text(release_dir.name)}</title><style>{STYLE}</style></head><body>"
            f"<h1>MMBU review sheet</h1><p>Release <code>{_text(release_dir)}</code>: {count} row(s), up to "
            f"{per_dataset} per dataset and task, drawn with seed {seed}. Images are shown as a model receives "
            f"them (at most {PREVIEW_SIDE} pixels on the long side, the region of interest outlined in "
            f"{ROI_COLOUR_NAME}); closed detection also shows its options' boxes.</p>"
            + (f"<h2>Rows that could not be drawn</h2><ul>{problems}</ul>" if problems else "")
            + f"<ul class=toc>{toc}</ul>{''.join(body)}</body></html>\n")


def _anchor(dataset: str) -> str:
    return "d-" + hashlib.sha256(dataset.encode()).hexdigest()[:12]

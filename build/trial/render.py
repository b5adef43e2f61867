"""A trial's report as text, and a few of its questions drawn: the image with its box(es) and mask, as a model
will be shown them."""
from __future__ import annotations

import io
import math
import string
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw

from mmbu.build.trial.run import NO_SPLIT, TrialReport
from mmbu.core.files import write_bytes_atomic
from mmbu.core.release import Task
from mmbu.curation.manifest.model import TASKS

BOX_COLOUR = (255, 40, 40)
MASK_COLOUR = (255, 220, 0)
MASK_ALPHA = 0.45
SHOWN_EXCLUSION_REASONS = 5


def report_lines(report: TrialReport, per_task: int) -> list[str]:
    """The report as the command prints it."""
    manifest, fetched = report.manifest, report.fetch
    if fetched.status == "error":
        return [f"✗ fetch: {fetched.error}"]
    lines = [f"✓ fetch: {'already complete' if fetched.status == 'up_to_date' else 'fetched'} from "
             f"{fetched.fetched_from} ({len(fetched.files)} file(s), {fetched.bytes:,} bytes)"]
    stated = f" of the {report.stated:,} its evidence states" if report.stated else ""
    lines.append(f"{'✓' if report.samples else '✗'} layout ({manifest.layout.kind}): {report.samples:,} sample(s)"
                 f"{stated}")
    if report.counts:
        lines += ["", "per label and split (images, or objects for boxes and masks):", *_count_lines(report)]
    if report.checks:
        lines += ["", "the fetched tree (files below each folder):", *(f"  {line}" for line in report.tree),
                  "", "the layout's patterns:", *(f"  {check.sentence()}" for check in report.checks)]
    outcome = report.outcome
    if outcome is not None:
        lines += ["", *_exclusion_lines(outcome.exclusions)]
        if outcome.error:
            lines.append(f"✗ build: {outcome.error}")
        elif outcome.rows_per_task:
            lines.append("rows per task: " + ", ".join(f"{task} {count:,}" for task, count in
                                                       outcome.rows_per_task.items()))
    if per_task and report.rows is not None and len(report.rows):
        lines += ["", f"questions ({per_task} per task, full-context template):"]
        for row in sampled_rows(report.rows, per_task).itertuples():
            lines += ["", *question_lines(row)]
    return lines


def _count_lines(report: TrialReport) -> list[str]:
    rows = []
    for (split, raw), count in sorted(report.counts.items(), key=lambda item: (item[0][0], -item[1], item[0][1])):
        spec = report.manifest.label_spec(raw)
        shown = f"{raw} → {spec.name}" if spec else f"{raw} (not in labels: excluded)"
        rows.append(f"  {'' if split == NO_SPLIT else split + ': '}{shown}: {count:,}")
    return rows


def _exclusion_lines(exclusions: list[dict]) -> list[str]:
    if not exclusions:
        return ["no exclusions"]
    reasons = pd.Series([e["reason"] for e in exclusions]).value_counts()
    lines = [f"{len(exclusions):,} exclusion(s), by reason (all of them in the build's exclusions.csv):"]
    for reason, count in reasons.head(SHOWN_EXCLUSION_REASONS).items():
        example = next(e["item"] for e in exclusions if e["reason"] == reason)
        lines.append(f"  {count:,} × {reason} (e.g. {example})")
    if len(reasons) > SHOWN_EXCLUSION_REASONS:
        lines.append(f"  ... and {len(reasons) - SHOWN_EXCLUSION_REASONS} more reasons")
    return lines


def sampled_rows(rows: pd.DataFrame, per_task: int) -> pd.DataFrame:
    """Up to `per_task` rows of each task, each of another label where the dataset has several."""
    picked = []
    for task in TASKS:
        of_task = rows[rows["task"] == task]
        firsts = of_task.drop_duplicates("label").head(per_task)
        more = of_task.drop(firsts.index).head(per_task - len(firsts))
        picked.append(pd.concat([firsts, more]))
    return pd.concat(picked) if picked else rows.head(0)


def question_lines(row: object) -> list[str]:
    boxes = _boxes(getattr(row, "boxes"))
    where = f" (box {boxes[0]})" if boxes and row.task == Task.BOX_GROUNDED else ""
    target = f" (target: {row.target})" if isinstance(row.target, str) else ""
    lines = [f"[{row.task}] {row.source_path}{where}{target}", f"  Q: {row.question_full_context}"]
    options = list(row.options) if row.options is not None else []
    if options:
        lines.append("  " + "  ".join(f"{letter}) {option}" for letter, option in zip(string.ascii_uppercase, options)))
    lines.append(f"  answer: {row.answer}")
    return lines


def draw_rows(rows: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Each row's image with its boxes (red) and mask (yellow, half transparent) drawn, one PNG per row."""
    written = []
    for number, row in enumerate(rows.itertuples(), start=1):
        with Image.open(row.image) as opened:
            picture = opened.convert("RGB")
        if isinstance(row.mask, str) and row.mask:
            with Image.open(row.mask) as opened:
                inside = np.asarray(opened.convert("L")) > 0
            pixels = np.asarray(picture).astype(np.float32)
            pixels[inside] = (1 - MASK_ALPHA) * pixels[inside] + MASK_ALPHA * np.array(MASK_COLOUR, np.float32)
            picture = Image.fromarray(pixels.round().astype(np.uint8))
        draw = ImageDraw.Draw(picture)
        width = max(1, math.ceil(max(picture.size) / 300))
        for x1, y1, x2, y2 in _boxes(row.boxes):
            draw.rectangle((x1, y1, x2 - 1, y2 - 1), outline=BOX_COLOUR, width=width)
        buffer = io.BytesIO()
        picture.save(buffer, format="PNG")
        path = Path(out_dir) / f"{number:02d}-{row.task}-{row.sample_id}.png"
        written.append(write_bytes_atomic(path, buffer.getvalue()))
    return written


def _boxes(value: object) -> list[list[int]]:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    return [[int(v) for v in box] for box in value]

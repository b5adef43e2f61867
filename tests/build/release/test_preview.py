"""`mmbu release preview`: the static review sheet of a written release (the synthetic release of conftest)."""
from __future__ import annotations

import io
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from PIL import Image

from mmbu.build.release import write_release
from mmbu.build.release.preview import OPTION_COLOURS, PreviewError, write_preview
from mmbu.cli import cli
from mmbu.core.drawing import ROI_COLOUR

BUILD_INFO = {"created": "2026-01-01T00:00:00+00:00", "seeds": {"questions": 1}}


@pytest.fixture(scope="module")
def release(built, tmp_path_factory):
    out = tmp_path_factory.mktemp("preview") / "release"
    write_release(built["rows_by_task"], out, built["manifests"], BUILD_INFO, exclusions=built["exclusions"])
    return out


class Page(HTMLParser):
    """The sheet's images, articles and text, read as a browser would parse it."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "img":
            self.images.append(dict(attrs)["src"])

    def handle_data(self, data):
        self.text.append(data)


def parsed(page: Path) -> Page:
    reader = Page()
    reader.feed(page.read_text(encoding="utf-8"))
    return reader


def pixels(path: Path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("RGB"))


def test_the_sheet_shows_n_rows_per_dataset_and_task_with_their_images(release, built, tmp_path):
    report = write_preview(release, tmp_path / "sheet", per_dataset=2, seed=4)
    expected = sum(min(2, count) for frame in built["rows_by_task"].values()
                   for count in frame.groupby("dataset_id").size())
    assert report.rows == expected and report.failures == []
    page = parsed(report.page)
    assert page.tags.count("article") == expected and "script" not in page.tags
    assert all((tmp_path / "sheet" / src).is_file() for src in page.images)
    text = " ".join(page.text)
    shown = set(re.findall(r"demo_\w+-[0-9a-f]{16}", text))
    assert len(shown) == expected
    rows = pd.concat(built["rows_by_task"].values()).set_index("sample_id")
    for sample in shown:
        assert rows.loc[sample, "question_full_context"] in text
        assert rows.loc[sample, "answer"] in text
    again = write_preview(release, tmp_path / "sheet", per_dataset=2, seed=4)  # an earlier sheet is replaced whole
    assert set(re.findall(r"demo_\w+-[0-9a-f]{16}", " ".join(parsed(again.page).text))) == shown


def test_regions_are_drawn_as_the_evaluation_draws_them_and_detection_options_in_their_colours(release, built,
                                                                                                    tmp_path):
    report = write_preview(release, tmp_path / "sheet", per_dataset=50)
    images = tmp_path / "sheet" / "img"
    rows = pd.concat(built["rows_by_task"].values())
    for row in rows.itertuples():
        files = sorted(images.glob(f"{row.sample_id}-*.png"), key=lambda f: f.name.endswith("-options.png"))
        seen = pixels(files[0])
        green = np.all(seen == ROI_COLOUR, axis=-1)
        if row.task == "box_grounded_classification":
            x1, y1, x2, y2 = row.boxes[0]
            assert green.any() and not green[y1:y2, x1:x2].any()  # just outside the box, never on it
        elif row.task == "mask_grounded_classification":
            assert green.any()
        else:
            assert not green.any()
        if row.task == "object_detection":
            drawn = pixels(files[1])  # enlarged by a whole factor so that small images stay legible
            k = drawn.shape[1] // seen.shape[1]
            assert k >= 1 and drawn.shape[0] == k * seen.shape[0] and max(drawn.shape[:2]) >= 512
            boxes = [o for o in row.options if o.startswith("[")]
            for index, option in enumerate(row.options):
                if option.startswith("["):
                    x1, y1, x2, y2 = (k * int(v) for v in option.strip("[]").split(","))
                    colour = OPTION_COLOURS[index]
                    left_edge = np.all(drawn[y1:y2, x1] == colour, axis=-1)
                    assert left_edge.all(), (option, colour)
            assert len(boxes) >= 2
    assert report.rows == len(rows)


def test_release_text_cannot_inject_markup_or_write_outside_the_folder(built, tmp_path):
    rows = {task: frame.copy() for task, frame in built["rows_by_task"].items()}
    hostile = rows["ungrounded_classification"]
    hostile.loc[hostile.index[0], "question_full_context"] = 'What is <script>alert("x")</script><img src=x onerror=y>?'
    hostile.loc[hostile.index[0], "dataset_name"] = "</h2><iframe src=evil>"
    hostile.loc[hostile.index[0], "sample_id"] = "../../outside"
    out = tmp_path / "release"
    write_release(rows, out, built["manifests"], BUILD_INFO)
    report = write_preview(out, tmp_path / "sheet", per_dataset=50)
    page = parsed(report.page)
    assert {"script", "iframe"}.isdisjoint(page.tags)
    assert all(src.startswith("img/") and ".." not in src for src in page.images)
    assert 'What is <script>alert("x")</script><img src=x onerror=y>?' in "".join(page.text)  # shown as text
    assert not (tmp_path / "outside.png").exists() and len(list((tmp_path / "sheet" / "img").glob("*.png"))) > 0


def test_the_command_exits_0_1_or_2(release, built, tmp_path):
    runner = CliRunner()
    result = runner.invoke(cli, ["release", "preview", str(release), "--out", str(tmp_path / "sheet"),
                                 "--per-dataset", "1"])
    assert result.exit_code == 0, result.output
    assert "review sheet:" in result.output and (tmp_path / "sheet" / "index.html").is_file()

    nothing = runner.invoke(cli, ["release", "preview", str(tmp_path / "nowhere"), "--out", str(tmp_path / "s2")])
    assert nothing.exit_code == 2 and "no release here" in nothing.output and "Traceback" not in nothing.output
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    busy = runner.invoke(cli, ["release", "preview", str(release), "--out", str(tmp_path / "busy")])
    assert busy.exit_code == 2 and "not empty and not a review sheet" in busy.output
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"

    rows = {task: frame.copy() for task, frame in built["rows_by_task"].items()}
    broken = rows["ungrounded_classification"]
    damaged = tmp_path / "damaged.png"
    damaged.write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    broken["image"] = broken["image"].astype(object)
    broken.loc[broken.index[0], "image"] = str(damaged)
    out = tmp_path / "broken-release"
    write_release(rows, out, built["manifests"], BUILD_INFO)
    result = runner.invoke(cli, ["release", "preview", str(out), "--out", str(tmp_path / "s3"), "--per-dataset", "50"])
    assert result.exit_code == 1 and "the image cannot be drawn" in result.output


def test_a_folder_that_is_no_release_is_refused(tmp_path):
    with pytest.raises(PreviewError, match="no release here"):
        write_preview(tmp_path, tmp_path / "sheet")

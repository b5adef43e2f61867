"""`records(frame)` is `frame.to_dict(orient="records")` value for value and type for type, for every dtype the
rows step's frames hold (Arrow-backed `str`, object columns of lists, arrays and numpy scalars, floats with NaN,
ints, bools, nullable and datetime columns) and for the frames the step itself makes."""
from __future__ import annotations

import numpy as np
import pandas as pd
from PIL import Image
from support.build_manifests import make_manifest, write_png

from mmbu.build.layouts import ConvertedImage, place_items, read_samples
from mmbu.build.questions import task_items
from mmbu.build.records import records


def _same(frame: pd.DataFrame) -> None:
    fast, slow = records(frame), frame.to_dict(orient="records")
    assert repr(fast) == repr(slow)  # NaN != NaN: compare the printed values, then every cell's type
    assert [[type(v) for v in row.values()] for row in fast] == [[type(v) for v in row.values()] for row in slow]
    assert [list(row) for row in fast] == [list(row) for row in slow]


def test_every_dtype_gives_the_cells_to_dict_gives():
    frame = pd.DataFrame({
        "text": ["a", None, "c"], "lists": [[1, 2], None, np.int64(3)], "floats": [1.0, np.nan, 2.5],
        "ints": [1, 2, 3], "bools": [True, False, True], "nones": [None, None, None], "ints_with_none": [1, None, 3],
        "arrays": [np.array([1, 2]), None, [np.array([3])]], "numpy_scalars": [np.float32(1.5), np.bool_(True), "x"],
        "when": pd.to_datetime(["2020-01-01", None, "2021-01-01"]), "category": pd.Categorical(["x", "y", None]),
        "nullable_ints": pd.array([1, None, 3], dtype="Int64"), "mixed_na": [pd.NA, 1, "x"],
        "strings_na": pd.array(["p", None, "q"], dtype="string[pyarrow]"),
    })
    _same(frame)
    _same(frame.iloc[0:0])
    _same(pd.DataFrame(index=range(2)))


def test_the_rows_step_frames_give_the_cells_to_dict_gives(tmp_path):
    raw = tmp_path / "raw"
    mask = np.zeros((20, 40), np.uint8)
    mask[4:12, 8:24] = 1
    mask[14:18, 30:36] = 2
    (raw / "masks").mkdir(parents=True)
    for name in ("a", "b"):
        write_png(raw / "images" / f"{name}.png", size=(40, 20))
        Image.fromarray(mask).save(raw / "masks" / f"{name}.png")
    manifest = make_manifest({"kind": "image_mask_pairs", "images": "images/*.png", "masks": "masks/*.png",
                              "mask_values": {1: "gland", 2: "stroma"}, "instances": "components"},
                             labels={"gland": "gland", "stroma": "stroma"},
                             tasks=["box_grounded_classification", "mask_grounded_classification", "object_detection"])
    samples, _ = read_samples(manifest, raw)
    items = task_items(samples, manifest)
    _same(items)
    converted = {s.sample_id: ConvertedImage(s.image_path, {"width": 40, "height": 20}) for s in samples[:1]}
    placed, _ = place_items(items, {s.sample_id: s for s in samples}, converted, tmp_path / "roi")
    assert len(placed) and placed["mask"].notna().any() and placed["mask"].isna().any()
    _same(placed)

"""A dataset of DICOM whole-slide series through the build's steps: layout → convert → rows.

Two slides, each three pyramid levels plus a label and an overview image written by pydicom, and two
CT slices beside them, listed file by file by a folder-per-class layout: the build makes exactly two
slide samples, each converted through the same openslide path as `mmbu convert DIR` (pixel for
pixel), the CT slices are converted one per file as before, a rebuild with nothing changed does no
work, and rewriting one pyramid level re-converts that slide (though its base-level file is untouched)
and only it.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pydicom
import yaml
from PIL import Image
from support.build_manifests import make_manifest, write_taxonomy

sys.path.insert(0, str(Path(__file__).parent / "convert"))
import factories_dicom as fd  # noqa: E402
from factories_dicom_wsi import slide_scene, write_slide_instance, write_slide_pyramid  # noqa: E402

from mmbu.build.convert.batch import convert_paths  # noqa: E402
from mmbu.build.steps import ConvertedFile, DatasetJob, convert_options, process_dataset  # noqa: E402
from mmbu.curation.manifest import load_manifest  # noqa: E402

DATASET = "demo_slides"
SLIDE_METADATA = {"domain": "Pathology", "modality": "digital pathology", "sub_modality": "whole-slide imaging",
                  "stain": "hematoxylin and eosin", "specimen_subregion": "breast", "topic": "tissue density",
                  "dataset_name": "Demo slides", "context": "breast tissue sections", "original_task": "classification"}
LABELS = {"dense": "densely packed tissue", "sparse": "sparsely packed tissue"}


def _dataset(root: Path) -> tuple[Path, Path]:
    """The manifest file and the fetched folder of a folder-per-class dataset of two slides and a CT."""
    raw = root / "data" / "raw" / DATASET
    write_slide_pyramid(raw / "dense" / "slide-a", slide_scene(128, 96))
    write_slide_pyramid(raw / "sparse" / "slide-b", slide_scene(128, 96)[::-1].copy())
    (raw / "sparse" / "ct").mkdir(parents=True)
    for index in range(2):
        ct = fd.ct_dataset(fd.ct_ramp(16 + index, 16))
        del ct.Modality  # its header would (rightly) override this pathology manifest's modality at the rows step
        fd.save(ct, raw / "sparse" / "ct" / f"ct-{index}.dcm")
    manifest = make_manifest({"kind": "folder_per_class", "images": "**/*.dcm"}, dataset_id=DATASET, labels=LABELS,
                             metadata=SLIDE_METADATA, convert={"max_size": 64},
                             questions={"options_name": "tissue density"})
    path = root / "manifests" / f"{DATASET}.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(manifest.model_dump(mode="json", exclude_none=True), sort_keys=False),
                    encoding="utf-8")
    return path, raw


def _converted(work: Path) -> dict[str, dict]:
    """source path -> {sample, record} from the convert step's output."""
    return {sample.source_path: {"sample": sample.model_dump(mode="json"), "record": conversion.record,
                                 "png": conversion.png} for sample, conversion in ConvertedFile(work / "converted.jsonl")}


def _pixels(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image)


def test_each_slide_is_one_sample_converted_as_mmbu_convert_converts_its_folder(tmp_path):
    manifest_path, raw = _dataset(tmp_path)
    write_taxonomy(tmp_path)
    job = DatasetJob(manifest_path=manifest_path, data_dir=tmp_path / "data", taxonomy_path=tmp_path / "taxonomy.yaml")
    work = tmp_path / "data" / "work" / DATASET

    first = process_dataset(job)

    assert first.ok, first.error
    assert first.ran == ["layout", "convert", "rows", "hashes"]
    assert first.exclusions == []
    converted = _converted(work)
    assert sorted(converted) == ["dense/slide-a/pyramid-2.dcm", "sparse/ct/ct-0.dcm", "sparse/ct/ct-1.dcm",
                                 "sparse/slide-b/pyramid-2.dcm"]
    rows = pd.read_parquet(first.rows_path)
    assert sorted(rows["source_path"]) == sorted(converted)  # one ungrounded row per sample, none per instance
    assert rows.loc[rows["source_path"] == "dense/slide-a/pyramid-2.dcm", "answer"].tolist() == [LABELS["dense"]]

    mmbu_convert = convert_paths([raw / "dense" / "slide-a", raw / "sparse" / "slide-b"], tmp_path / "convert",
                                 convert_options(load_manifest(manifest_path)))
    scenes = (slide_scene(128, 96), slide_scene(128, 96)[::-1])
    for folder, record, scene in zip(("dense/slide-a", "sparse/slide-b"), mmbu_convert, scenes):
        built = converted[f"{folder}/pyramid-2.dcm"]
        params = built["record"]["params"]
        assert built["record"]["format"] == "wsi" and params["vendor"] == "dicom"
        assert params["slide_file"] == "pyramid-2.dcm"  # opened at the highest-resolution level
        assert params["level0_dimensions"] == [128, 96] and params["level_count"] == 3
        assert params["level"] == 1 and params["output_size"] == [64, 48]  # the level nearest the 64-pixel output
        assert _pixels(built["png"]).shape == (48, 64, 3)
        np.testing.assert_array_equal(_pixels(built["png"]), _pixels(Path(record["output"])))
        np.testing.assert_array_equal(_pixels(built["png"]), scene[::2, ::2])  # level 1 as written, pixel for pixel
    assert converted["sparse/ct/ct-0.dcm"]["record"]["format"] == "dicom"

    # nothing changed: no step runs
    assert process_dataset(job).ran == []

    # a new lower level of slide-a: its base-level file is untouched, yet it is converted again, alone
    slide_b_png = converted["sparse/slide-b/pyramid-2.dcm"]["png"]
    untouched = slide_b_png.stat().st_mtime_ns
    level1 = raw / "dense" / "slide-a" / "pyramid-1.dcm"
    header = pydicom.dcmread(level1, stop_before_pixels=True)
    write_slide_instance(level1, np.full((48, 64, 3), 40, np.uint8), header.SeriesInstanceUID, header.StudyInstanceUID)
    third = process_dataset(job)
    assert third.ok and third.ran == ["layout", "convert", "rows", "hashes"]
    again = _converted(work)
    assert (_pixels(again["dense/slide-a/pyramid-2.dcm"]["png"]) == 40).all()
    assert slide_b_png.stat().st_mtime_ns == untouched

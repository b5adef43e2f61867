"""parquet: Hugging Face tables with the image in a column ({bytes, path} structs or raw bytes), labels
named by ClassLabel names from the card or the manifest, masks and detection objects in columns."""
from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasets import ClassLabel, Dataset, Features, Image as ImageFeature, Sequence, Value
from huggingface_hub import DatasetCardData
from PIL import Image
from pydantic import ValidationError
from support.build_manifests import make_manifest

from mmbu.build.layouts import read_mask, read_samples, region_mask

HAM_LABELS = {"akiec": "actinic keratosis", "bcc": "basal cell lesion", "bkl": "benign keratosis-like lesion",
              "df": "dermatofibroma", "mel": "melanocytic lesion, melanoma", "nv": "melanocytic nevus",
              "vasc": "vascular lesion"}


def png(array):
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def jpeg(value, size=(24, 16)):
    buffer = io.BytesIO()
    Image.fromarray(np.full((size[1], size[0], 3), value, np.uint8)).save(buffer, format="JPEG", quality=95)
    return buffer.getvalue()


def skin_cancer_mirror(raw):
    """marmal88/skin_cancer (HAM10000 on the Hugging Face hub): `data/train-00000-of-00005-7eed077f2f8e6d15.parquet`,
    ..., `data/test-00000-of-00001-61e7cf54bf274ae2.parquet` (huggingface.co/datasets/marmal88/skin_cancer/tree/main/data),
    written here by `datasets` with an `Image` column and HAM10000's `image_id`, `dx` text columns."""
    (raw / "data").mkdir(parents=True)
    features = Features({"image": ImageFeature(), "image_id": Value("string"), "dx": Value("string")})
    train = Dataset.from_dict({"image": [jpeg(30), jpeg(60), jpeg(90)], "image_id": ["ISIC_0027419", "ISIC_0025030",
                               "ISIC_0026769"], "dx": ["bkl", "bkl", "nv"]}, features=features)
    train.to_parquet(raw / "data" / "train-00000-of-00005-7eed077f2f8e6d15.parquet")
    test = Dataset.from_dict({"image": [jpeg(120)], "image_id": ["ISIC_0024306"], "dx": ["zzz"]}, features=features)
    test.to_parquet(raw / "data" / "test-00000-of-00001-61e7cf54bf274ae2.parquet")
    return train


def test_image_structs_become_samples_with_the_source_bytes(tmp_path):
    raw = tmp_path / "raw"
    train = skin_cancer_mirror(raw)
    layout = {"kind": "parquet", "files": "data/{split}-*.parquet", "label_column": "dx",
              "metadata_columns": {"context": "image_id"}}
    samples, exclusions = read_samples(make_manifest(layout, labels=HAM_LABELS), raw, tmp_path / "cache")

    assert [(s.source_path.split("/")[1][:5], s.frame, s.label) for s in samples] == [
        ("train", "row=0", "bkl"), ("train", "row=1", "bkl"), ("train", "row=2", "nv")]
    for sample, cell in zip(samples, train.with_format("arrow")["image"].to_pylist()):
        assert sample.image_path.read_bytes() == cell["bytes"] and sample.image_path.suffix == ".jpg"
        assert sample.image_size == (24, 16)
    assert samples[0].row_metadata == {"context": "ISIC_0027419"}
    assert [(e.item, e.reason) for e in exclusions] == [
        ("data/test-00000-of-00001-61e7cf54bf274ae2.parquet#row=0", "label 'zzz' is not in the manifest's label vocabulary")]


def class_label_repo(raw, card=True):
    """A repository as `datasets.push_to_hub` lays it out: `data/train-00000-of-00001.parquet` and a `README.md`
    whose YAML `dataset_info.features` names the ClassLabel values (written by `datasets`/`huggingface_hub`).
    The table itself is written by plain pyarrow with raw PNG bytes and an int64 label, so the names can only
    come from the card."""
    (raw / "data").mkdir(parents=True)
    table = pa.table({"image": pa.array([png(np.full((8, 8), v, np.uint8)) for v in (10, 20, 30)], pa.binary()),
                      "label": pa.array([0, 6, 9], pa.int64())})
    pq.write_table(table, raw / "data" / "train-00000-of-00001.parquet")
    if card:
        features = Features({"image": ImageFeature(), "label": ClassLabel(names=list(HAM_LABELS))})
        card_yaml = DatasetCardData(dataset_info={"features": features._to_yaml_list()}).to_yaml()
        (raw / "README.md").write_text(f"---\n{card_yaml}\n---\n# HAM10000\n", encoding="utf-8")


def test_class_label_names_come_from_the_card_and_raw_bytes_are_images(tmp_path):
    raw = tmp_path / "raw"
    class_label_repo(raw)
    layout = {"kind": "parquet", "files": "data/{split}-*.parquet", "label_column": "label"}
    samples, exclusions = read_samples(make_manifest(layout, labels=HAM_LABELS), raw, tmp_path / "cache")
    assert [s.label for s in samples] == ["akiec", "vasc"]
    assert np.asarray(Image.open(samples[1].image_path))[0, 0] == 20
    assert [e.reason for e in exclusions] == ["label index 9 in label is outside its class names (0..6)"]


def test_class_names_in_the_manifest_win_and_without_any_the_index_is_the_label(tmp_path):
    raw = tmp_path / "raw"
    class_label_repo(raw, card=False)
    layout = {"kind": "parquet", "files": "data/*.parquet", "label_column": "label"}
    samples, _ = read_samples(make_manifest(layout, labels={"0": "zero", "6": "six", "9": "nine"}), raw,
                              tmp_path / "cache")
    assert [s.label for s in samples] == ["0", "6", "9"]
    named = {**layout, "class_names": [f"c{i}" for i in range(10)]}
    samples, _ = read_samples(make_manifest(named, labels={"c0": "zero", "c6": "six", "c9": "nine"}), raw,
                              tmp_path / "cache")
    assert [s.label for s in samples] == ["c0", "c6", "c9"]


def test_mask_and_object_columns(tmp_path):
    raw = tmp_path / "raw"
    (raw / "data").mkdir(parents=True)
    mask = np.zeros((20, 30), np.uint8)
    mask[2:6, 3:9] = 1
    mask[10:15, 20:28] = 2
    features = Features({"image": ImageFeature(), "mask": ImageFeature(),
                         "objects": {"bbox": Sequence(Sequence(Value("float32"), length=4)),
                                     "category": Sequence(ClassLabel(names=["rbc", "wbc"]))}})
    Dataset.from_dict({"image": [png(np.zeros((20, 30, 3), np.uint8))], "mask": [png(mask)],
                       "objects": [{"bbox": [[1, 2, 5, 6], [25, 15, 10, 10]], "category": [1, 0]}]},
                      features=features).to_parquet(raw / "data" / "train-00000-of-00001.parquet")
    layout = {"kind": "parquet", "files": "data/*.parquet", "mask_column": "mask", "mask_values": {1: "gland", 2: "stroma"},
              "objects_column": "objects"}
    samples, exclusions = read_samples(make_manifest(layout, labels={"gland": "gland", "stroma": "stroma", "rbc": "red cell",
                                                                     "wbc": "white cell"},
                                                     tasks=["mask_grounded_classification", "object_detection"]),
                                       raw, tmp_path / "cache")
    sample, = samples
    assert [(r.label, r.box) for r in sample.regions] == [
        ("gland", (3.0, 2.0, 9.0, 6.0)), ("stroma", (20.0, 10.0, 28.0, 15.0)), ("wbc", (1.0, 2.0, 6.0, 8.0)),
        ("rbc", (25.0, 15.0, 30.0, 20.0))]  # category names from the features stored in the file; box clipped
    assert np.array_equal(region_mask(read_mask(sample.mask_path), sample.regions[1]), mask == 2)
    assert exclusions == []


@pytest.mark.parametrize("layout, message", [
    ({"files": "data/*.parquet"}, "needs label_column, mask_column or objects_column"),
    ({"files": "data/*.parquet", "label_column": "l", "splits": ["test"]}, "has none"),
    ({"files": "data/*.parquet", "mask_column": "m"}, "mask_column needs"),
])
def test_parquet_fields_are_checked(layout, message):
    with pytest.raises(ValidationError, match=message):
        make_manifest({"kind": "parquet", **layout}, labels=HAM_LABELS)

"""parquet: Hugging Face tables with the image in a column ({bytes, path} structs or raw bytes), labels
named by ClassLabel names from the card or the manifest, masks and detection objects in columns."""
from __future__ import annotations

import base64
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

    assert [(s.source_path.split("/")[1][:5], s.part, s.label) for s in samples] == [
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


SURGWOUND_FIELDS = {"Healing Status": ["Healed", "Not Healed"],
                    "Closure Method": ["Invisible", "Sutures", "Staples", "Adhesives", "Uncertain"]}


def surgwound(raw, images):
    """SurgWound (huggingface.co/datasets/taruntr/SurgWound, CC BY-SA 4.0): one row per image and attribute, columns
    `id` (`606.jpg_healing_status`), `image_name`, `field` (`Healing Status`, `Closure Method`, ...), `task_type`
    (`multi_choice`), `image` (the JPEG as base64 text, `/9j/4AAQ...`), `question`, `options` (a list) and
    `answer` (as the dataset viewer shows them: https://hugingapi.com/datasets/taruntr/SurgWound). The viewer
    reads an auto-converted copy, so the file name is the Hub's conversion layout `default/<split>/0000.parquet`."""
    rows = {name: [] for name in ("id", "image_name", "field", "task_type", "image", "question", "options", "answer")}
    for name, (value, answers) in images.items():
        for field, answer in zip(SURGWOUND_FIELDS, answers):
            rows["id"].append(f"{name}_{field.lower().replace(' ', '_')}")
            rows["image_name"].append(name)
            rows["field"].append(field)
            rows["task_type"].append("multi_choice")
            rows["image"].append(base64.b64encode(jpeg(value)).decode("ascii"))
            rows["question"].append(f"What is the {field.lower()} of this surgical wound?")
            rows["options"].append(SURGWOUND_FIELDS[field])
            rows["answer"].append(answer)
    (raw / "default" / "train").mkdir(parents=True)
    pq.write_table(pa.table(rows), raw / "default" / "train" / "0000.parquet")
    return rows


SURGWOUND_LAYOUT = {"kind": "parquet", "files": "default/{split}/*.parquet", "image_encoding": "base64",
                    "where": {"field": ["Healing Status"]}, "label_column": "answer",
                    "metadata_columns": {"context": "image_name"}}


def test_base64_image_text_and_a_row_filter_give_one_sample_per_image_for_one_attribute(tmp_path):
    raw = tmp_path / "raw"
    rows = surgwound(raw, {"606.jpg": (40, ["Healed", "Sutures"]), "607.jpg": (200, ["Not Healed", "Staples"])})
    manifest = make_manifest(SURGWOUND_LAYOUT, labels={"Healed": "healed wound", "Not Healed": "wound not healed"})
    samples, exclusions = read_samples(manifest, raw, tmp_path / "cache")

    assert exclusions == []
    assert [(s.part, s.label, s.row_metadata["context"]) for s in samples] == [
        ("row=0", "Healed", "606.jpg"), ("row=2", "Not Healed", "607.jpg")]  # rows 1 and 3 ask about closure
    for sample, row in zip(samples, (0, 2)):
        assert sample.image_path.read_bytes() == base64.b64decode(rows["image"][row]) and sample.image_path.suffix == ".jpg"
    assert samples[0].sample_id == read_samples(manifest, raw, tmp_path / "cache")[0][0].sample_id  # stable


def test_broken_base64_cells_and_unlisted_answers_are_one_sentence_each(tmp_path):
    raw = tmp_path / "raw"
    rows = surgwound(raw, {"606.jpg": (40, ["Healed", "Sutures"]), "607.jpg": (200, ["Uncertain", "Staples"]),
                           "608.jpg": (90, ["Healed", "Staples"])})
    rows["image"][4] = rows["image"][4][:-3] + "!!!"  # 608.jpg's Healing Status row: damaged text
    rows["image"][0] = "data:image/jpeg;base64," + rows["image"][0]  # a data URI prefix is read as base64 too
    pq.write_table(pa.table(rows), raw / "default" / "train" / "0000.parquet")
    manifest = make_manifest(SURGWOUND_LAYOUT, labels={"Healed": "healed wound", "Not Healed": "wound not healed"})
    samples, exclusions = read_samples(manifest, raw, tmp_path / "cache")

    assert [s.part for s in samples] == ["row=0"]
    reasons = {e.item: e.reason for e in exclusions}
    assert reasons["default/train/0000.parquet#row=2"] == "label 'Uncertain' is not in the manifest's label vocabulary"
    assert reasons["default/train/0000.parquet#row=4"].startswith("the image cell is not valid base64 text")


def test_text_cells_need_an_encoding_and_a_missing_where_column_gets_a_did_you_mean(tmp_path):
    raw = tmp_path / "raw"
    surgwound(raw, {"606.jpg": (40, ["Healed", "Sutures"])})
    labels = {"Healed": "healed wound", "Not Healed": "wound not healed"}
    plain = {k: v for k, v in SURGWOUND_LAYOUT.items() if k != "image_encoding"}
    _, exclusions = read_samples(make_manifest(plain, labels=labels), raw, tmp_path / "cache")
    assert exclusions[0].reason == ("the image cell holds text, not image bytes; set image_encoding to base64 or path "
                                    "to say what the text is")
    typo = {**SURGWOUND_LAYOUT, "where": {"fields": ["Healing Status"]}}
    _, exclusions = read_samples(make_manifest(typo, labels=labels), raw, tmp_path / "cache")
    assert exclusions[0].reason == "the table has no column 'fields'; did you mean 'field'?"
    with pytest.raises(ValidationError, match="where lists no value for 'field'"):
        make_manifest({**SURGWOUND_LAYOUT, "where": {"field": []}}, labels=labels)


def test_image_cells_holding_only_a_path_name_files_of_the_dataset_which_become_the_samples(tmp_path, monkeypatch):
    """A table written by `datasets` `Dataset.to_parquet` from image paths keeps `{bytes: None, path}` structs
    (only `push_to_hub` embeds the files): the path names a file beside the table."""
    raw = tmp_path / "raw"
    (raw / "images").mkdir(parents=True)
    for name, value in (("a.png", 10), ("b.png", 250)):
        Image.fromarray(np.full((8, 12), value, np.uint8)).save(raw / "images" / name)
    outside = tmp_path / "secret.png"
    Image.fromarray(np.zeros((8, 12), np.uint8)).save(outside)
    monkeypatch.chdir(raw)  # `datasets` opens relative image paths from the working folder ...
    Image.fromarray(np.zeros((8, 12), np.uint8)).save(raw / "images" / "gone.png")  # ... so this one goes after
    Dataset.from_dict({"image": ["images/a.png", "images/b.png", str(outside), "../secret.png", "images/gone.png"],
                       "dx": ["nv", "bkl", "nv", "nv", "nv"]},
                      features=Features({"image": ImageFeature(), "dx": Value("string")})).to_parquet(raw / "table.parquet")
    (raw / "images" / "gone.png").unlink()
    assert pq.read_table(raw / "table.parquet").to_pylist()[0]["image"] == {"bytes": None, "path": "images/a.png"}
    layout = {"kind": "parquet", "files": "table.parquet", "label_column": "dx"}
    samples, exclusions = read_samples(make_manifest(layout, labels=HAM_LABELS), raw, tmp_path / "cache")

    assert [(s.source_path, s.image_path, s.label, s.part) for s in samples] == [
        ("images/a.png", raw / "images" / "a.png", "nv", None), ("images/b.png", raw / "images" / "b.png", "bkl", None)]
    assert samples[0].provenance == {"row": "table.parquet row 0"}
    reasons = [(e.item, e.reason) for e in exclusions]
    assert reasons[0] == ("table.parquet#row=2", f"the image cell's path {str(outside)!r} is absolute; write it "
                                                 "relative to the dataset's folder")
    assert reasons[1][1].startswith("the image cell's path '../secret.png' climbs out with '..'")
    assert reasons[2] == ("table.parquet#row=4", "the image cell names 'images/gone.png', which is not among the "
                                                 "fetched files under '.'")


def test_path_cells_written_by_datasets_to_parquet(tmp_path):
    raw = tmp_path / "raw"
    (raw / "images").mkdir(parents=True)
    Image.fromarray(np.full((8, 12, 3), 99, np.uint8)).save(raw / "images" / "a.png")
    Dataset.from_dict({"file": ["a.png"], "dx": ["nv"]}).to_parquet(raw / "table.parquet")
    layout = {"kind": "parquet", "files": "table.parquet", "image_column": "file", "image_encoding": "path",
              "image_root": "images", "label_column": "dx"}
    samples, exclusions = read_samples(make_manifest(layout, labels=HAM_LABELS), raw, tmp_path / "cache")
    assert exclusions == [] and [(s.source_path, s.label) for s in samples] == [("images/a.png", "nv")]

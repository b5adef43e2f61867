"""label_table beyond one column: one-hot columns and `|`-joined multi-label cells, one answer per image."""
from __future__ import annotations

import csv

import numpy as np
import pytest
from PIL import Image
from pydantic import ValidationError
from support.build_manifests import make_manifest

from mmbu.build.layouts import read_samples

ISIC_LABELS = {"MEL": "melanocytic lesion, melanoma", "NV": "melanocytic nevus", "BCC": "basal cell lesion",
               "AKIEC": "actinic keratosis", "BKL": "benign keratosis-like lesion", "DF": "dermatofibroma",
               "VASC": "vascular lesion"}


def write_image(path, value, size=(20, 16), suffix="JPEG"):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((size[1], size[0], 3), value, np.uint8)).save(path, format=suffix)


def isic_2018_task3(raw):
    """ISIC 2018 task 3 as its two zips unpack (isic-challenge-data.s3.amazonaws.com/2018/
    ISIC2018_Task3_Training_Input.zip and ..._GroundTruth.zip; columns as in
    /work/shared/reference/catalogue-sources.md): `ISIC2018_Task3_Training_Input/ISIC_<7 digits>.jpg` and a
    one-hot `ISIC2018_Task3_Training_GroundTruth/ISIC2018_Task3_Training_GroundTruth.csv`."""
    for number, value in ((24306, 10), (24307, 20), (24308, 30), (24309, 40), (24310, 50)):
        write_image(raw / "ISIC2018_Task3_Training_Input" / f"ISIC_00{number}.jpg", value)
    table = raw / "ISIC2018_Task3_Training_GroundTruth" / "ISIC2018_Task3_Training_GroundTruth.csv"
    table.parent.mkdir(parents=True)
    table.write_text("image,MEL,NV,BCC,AKIEC,BKL,DF,VASC\n"
                     "ISIC_0024306,0.0,1.0,0.0,0.0,0.0,0.0,0.0\n"
                     "ISIC_0024307,1.0,0.0,0.0,0.0,0.0,0.0,0.0\n"
                     "ISIC_0024308,1.0,1.0,0.0,0.0,0.0,0.0,0.0\n"    # two positives: no single answer
                     "ISIC_0024309,0.0,0.0,0.0,0.0,0.0,0.0,0.0\n"    # none
                     "ISIC_0024310,0.0,0.0,0.0,0.0,-1.0,0.0,0.0\n",  # neither positive nor negative
                     encoding="utf-8")


def isic_layout(**extra):
    return {"kind": "label_table", "table": "ISIC2018_Task3_Training_GroundTruth/ISIC2018_Task3_Training_GroundTruth.csv",
            "image_column": "image", "label_columns": list(ISIC_LABELS), "image_root": "ISIC2018_Task3_Training_Input",
            "image_suffix": ".jpg", **extra}


def test_one_hot_columns_give_one_label_and_exclude_rows_without_a_single_answer(tmp_path):
    raw = tmp_path / "raw"
    isic_2018_task3(raw)
    samples, exclusions = read_samples(make_manifest(isic_layout(), labels=ISIC_LABELS), raw)

    assert [(s.source_path, s.label) for s in samples] == [
        ("ISIC2018_Task3_Training_Input/ISIC_0024306.jpg", "NV"), ("ISIC2018_Task3_Training_Input/ISIC_0024307.jpg", "MEL")]
    assert np.asarray(Image.open(samples[1].image_path))[0, 0, 0] in range(18, 23)
    reasons = {e.item.rsplit("/", 1)[-1]: e.reason for e in exclusions}
    assert reasons["ISIC_0024308.jpg"] == ("2 labels are marked for this image (MEL, NV); a closed question has one "
                                           "right option, so images with more than one label are left out")
    assert reasons["ISIC_0024309.jpg"].startswith("no label is marked for this image")
    assert reasons["ISIC_0024310.jpg"].startswith("the label value(s) BKL='-1.0' are neither positive")


def test_a_named_no_finding_label_takes_rows_without_a_positive(tmp_path):
    raw = tmp_path / "raw"
    isic_2018_task3(raw)
    labels = {**ISIC_LABELS, "none": "no visible lesion"}
    samples, _ = read_samples(make_manifest(isic_layout(no_finding="none"), labels=labels), raw)
    assert [s.label for s in samples] == ["NV", "MEL", "none"]


def chestxray14(raw, images_root="images"):
    """NIH ChestX-ray14: `Data_Entry_2017.csv` with `Image Index` and `Finding Labels` joined by `|`
    ("No Finding" when none; mlmed/torchxrayvision@f4087a0b0d0cdc6a5877fb5456965b6d29adb1e5:
    torchxrayvision/datasets.py NIH_Dataset), images `images/00000001_000.png` as the NIH box archives unpack."""
    (raw).mkdir(parents=True, exist_ok=True)
    (raw / "Data_Entry_2017.csv").write_text(
        "Image Index,Finding Labels,Follow-up #,Patient ID,Patient Age,Patient Gender,View Position,"
        "OriginalImage[Width,Height],OriginalImagePixelSpacing[x,y],\n"
        "00000001_000.png,Cardiomegaly,0,1,58,M,PA,2682,2749,0.143,0.143,\n"
        "00000001_001.png,Cardiomegaly|Emphysema,1,1,58,M,PA,2894,2729,0.143,0.143,\n"
        "00000002_000.png,No Finding,0,2,81,M,PA,2500,2048,0.171,0.171,\n"
        "00000003_000.png,,0,3,81,F,PA,2582,2991,0.143,0.143,\n", encoding="utf-8")
    for index, name in enumerate(("00000001_000.png", "00000001_001.png", "00000002_000.png", "00000003_000.png")):
        folder = raw / images_root.replace("*", f"{index // 2 + 1:03d}")
        write_image(folder / name, 60 + index, suffix="PNG")


NIH_LABELS = {"Cardiomegaly": "enlarged heart", "Emphysema": "emphysema", "No Finding": "no visible abnormality"}


def nih_layout(**extra):
    return {"kind": "label_table", "table": "Data_Entry_2017.csv", "image_column": "Image Index",
            "label_column": "Finding Labels", "label_separator": "|", "image_root": "images", **extra}


def test_separator_joined_labels_keep_single_finding_rows_only(tmp_path):
    raw = tmp_path / "raw"
    chestxray14(raw)
    samples, exclusions = read_samples(make_manifest(nih_layout(), labels=NIH_LABELS), raw)
    assert [(s.source_path, s.label) for s in samples] == [
        ("images/00000001_000.png", "Cardiomegaly"), ("images/00000002_000.png", "No Finding")]
    assert [e.item for e in exclusions] == ["images/00000001_001.png", "images/00000003_000.png"]
    assert "(Cardiomegaly, Emphysema)" in exclusions[0].reason


def test_images_spread_over_several_folders_are_found_by_name(tmp_path):
    """The Kaggle copy (nih-chest-xrays/data) spreads them as `images_001/images/00000001_000.png`, ..."""
    raw = tmp_path / "raw"
    chestxray14(raw, images_root="images_*/images")
    samples, _ = read_samples(make_manifest(nih_layout(image_root="images_*/images"), labels=NIH_LABELS), raw)
    assert [s.source_path for s in samples] == ["images_001/images/00000001_000.png",
                                                "images_002/images/00000002_000.png"]


def test_a_misspelt_column_is_named_with_the_closest_one(tmp_path):
    raw = tmp_path / "raw"
    chestxray14(raw)
    samples, exclusions = read_samples(make_manifest(nih_layout(label_column="Finding Label"), labels=NIH_LABELS), raw)
    assert samples == []
    assert exclusions[0].reason == "the table has no column 'Finding Label'; did you mean 'Finding Labels'?"


@pytest.mark.parametrize("layout, message", [
    ({"label_column": "dx", "label_columns": ["MEL", "NV"]}, "exactly one of label_column"),
    ({}, "exactly one of label_column"),
    ({"label_columns": ["MEL", "NV"], "label_separator": "|"}, "need none"),
    ({"label_column": "dx", "positive_values": ["1"], "negative_values": ["1", "0"]}, "both positive and negative"),
])
def test_label_table_fields_are_checked(layout, message):
    with pytest.raises(ValidationError, match=message):
        make_manifest({"kind": "label_table", "table": "t.csv", "image_column": "image", **layout}, labels=ISIC_LABELS)


# An ISIC Archive DOI bundle's metadata.csv, as the archive writes it (ImageMarkup/isic@b3713ec
# isic/core/services/__init__.py image_metadata_csv and snapshot/__init__.py: a csv.DictWriter with
# isic_id, attribution, copyright_license, then the used metadata keys sorted; image_type values from
# ImageMarkup/isic-metadata@562f25c isic_metadata/fields.py ImageTypeEnum). One lesion photographed twice.
BUNDLE_COLUMNS = ["isic_id", "attribution", "copyright_license", "anatom_site_general", "diagnosis_1", "diagnosis_2",
                  "image_type", "lesion_id"]
BUNDLE_ROWS = [
    ("ISIC_0000001", "clinical: close-up", "Benign", "Benign melanocytic proliferations", "IL_0000001", 30),
    ("ISIC_0000002", "dermoscopic", "Benign", "Benign melanocytic proliferations", "IL_0000001", 60),
    ("ISIC_0000003", "clinical: close-up", "Malignant", "Malignant adnexal epithelial proliferations - Follicular",
     "IL_0000002", 90),
    ("ISIC_0000004", "clinical: overview", "Malignant", "", "IL_0000002", 120),
    ("ISIC_0000005", "dermoscopic", "", "", "IL_0000003", 150),  # no diagnosis: left out by the filter first
]
BUNDLE_LABELS = {"Benign": "benign skin lesion", "Malignant": "malignant skin lesion"}


def isic_doi_bundle(raw):
    """`images/<isic_id>.jpg` (JPEG, written with Pillow) beside `metadata.csv` (written with csv.DictWriter)."""
    raw.mkdir(parents=True, exist_ok=True)
    with (raw / "metadata.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=BUNDLE_COLUMNS)
        writer.writeheader()
        for isic_id, image_type, diagnosis_1, diagnosis_2, lesion_id, value in BUNDLE_ROWS:
            writer.writerow({"isic_id": isic_id, "attribution": "Hospital Italiano de Buenos Aires",
                             "copyright_license": "CC-BY", "anatom_site_general": "posterior torso",
                             "diagnosis_1": diagnosis_1, "diagnosis_2": diagnosis_2, "image_type": image_type,
                             "lesion_id": lesion_id})
            write_image(raw / "images" / f"{isic_id}.jpg", value)


def bundle_layout(**extra):
    return {"kind": "label_table", "table": "metadata.csv", "image_column": "isic_id", "image_root": "images",
            "image_suffix": ".jpg", "label_column": "diagnosis_1", **extra}


def test_where_keeps_only_the_rows_holding_a_listed_value_and_names_itself_in_each_exclusion(tmp_path):
    raw = tmp_path / "raw"
    isic_doi_bundle(raw)
    layout = bundle_layout(where={"image_type": ["clinical: close-up"]})
    samples, exclusions = read_samples(make_manifest(layout, labels=BUNDLE_LABELS), raw)

    assert [(s.source_path, s.label) for s in samples] == [("images/ISIC_0000001.jpg", "Benign"),
                                                           ("images/ISIC_0000003.jpg", "Malignant")]
    assert np.asarray(Image.open(samples[1].image_path))[8, 10, 0] in range(87, 94)  # ISIC_0000003's grey 90
    assert [(e.item, e.reason) for e in exclusions] == [
        ("metadata.csv:3", "the row of 'ISIC_0000002' is not read: where keeps image_type in ['clinical: close-up'] "
                           "and the row's image_type is 'dermoscopic'"),
        ("metadata.csv:5", "the row of 'ISIC_0000004' is not read: where keeps image_type in ['clinical: close-up'] "
                           "and the row's image_type is 'clinical: overview'"),
        ("metadata.csv:6", "the row of 'ISIC_0000005' is not read: where keeps image_type in ['clinical: close-up'] "
                           "and the row's image_type is 'dermoscopic'"),
    ]


def test_where_with_several_columns_keeps_rows_matching_all_of_them(tmp_path):
    raw = tmp_path / "raw"
    isic_doi_bundle(raw)
    layout = bundle_layout(where={"image_type": ["clinical: close-up", "clinical: overview"],
                                  "diagnosis_1": ["Malignant"]})
    samples, exclusions = read_samples(make_manifest(layout, labels=BUNDLE_LABELS), raw)

    assert [s.source_path for s in samples] == ["images/ISIC_0000003.jpg", "images/ISIC_0000004.jpg"]
    by_line = {e.item: e.reason for e in exclusions}
    assert by_line["metadata.csv:2"].endswith("where keeps diagnosis_1 in ['Malignant'] and the row's diagnosis_1 "
                                              "is 'Benign'")
    assert by_line["metadata.csv:6"].endswith("the row's image_type is 'dermoscopic'")  # the first failing column
    assert len(exclusions) == 3


def test_a_where_column_missing_from_the_table_excludes_the_table_with_the_closest_name(tmp_path):
    raw = tmp_path / "raw"
    isic_doi_bundle(raw)
    layout = bundle_layout(where={"imagetype": ["clinical: close-up"]})
    samples, exclusions = read_samples(make_manifest(layout, labels=BUNDLE_LABELS), raw)
    assert samples == []
    assert [(e.item, e.reason) for e in exclusions] == [
        ("metadata.csv", "the table has no column 'imagetype'; did you mean 'image_type'?")]


def test_a_where_without_values_is_refused_by_the_model():
    with pytest.raises(ValidationError, match="where lists no value for 'image_type'"):
        make_manifest(bundle_layout(where={"image_type": []}), labels=BUNDLE_LABELS)


def papila_like_workbook(raw):
    """An Excel label table as PAPILA-style clinical sheets are shipped: a title row would break the header, so the
    table sits on its own sheet after a notes sheet; the diagnosis is a numeric cell (0, 1, 2), as openpyxl writes it."""
    from openpyxl import Workbook

    for name, value in (("RET002OD", 10), ("RET002OS", 20), ("RET004OD", 30)):
        write_image(raw / "FundusImages" / f"{name}.jpg", value)
    workbook = Workbook()
    workbook.active.title = "Notes"
    workbook.active.append(["Diagnosis: 0 healthy, 1 glaucoma, 2 suspect"])
    sheet = workbook.create_sheet("Patients")
    for row in (["ID", "Age", "Diagnosis"], ["RET002OD", 57, 0], ["RET002OS", 57, 2], ["RET004OD", 71, 1],
                ["RET009OD", 66, 1]):
        sheet.append(row)
    workbook.save(raw / "ClinicalData.xlsx")


XLSX_LABELS = {"0": "healthy", "1": "glaucoma", "2": "suspect"}


def _xlsx_layout(**extra):
    return {"kind": "label_table", "table": "ClinicalData.xlsx", "sheet": "Patients", "image_column": "ID",
            "image_root": "FundusImages", "image_suffix": ".jpg", "label_column": "Diagnosis", **extra}


def test_an_excel_sheet_is_read_by_name_with_numeric_cells_as_their_text(tmp_path):
    raw = tmp_path / "raw"
    papila_like_workbook(raw)
    manifest = make_manifest(_xlsx_layout(), labels=XLSX_LABELS)
    samples, exclusions = read_samples(manifest, raw)

    assert {s.source_path: s.label for s in samples} == {"FundusImages/RET002OD.jpg": "0", "FundusImages/RET002OS.jpg": "2",
                                                         "FundusImages/RET004OD.jpg": "1"}
    (missing,) = exclusions  # RET009OD has a row but no image
    assert "RET009OD" in missing.item or "RET009OD" in missing.reason


def test_a_missing_sheet_is_one_sentence_naming_the_sheets_there(tmp_path):
    raw = tmp_path / "raw"
    papila_like_workbook(raw)
    manifest = make_manifest(_xlsx_layout(sheet="patients"), labels=XLSX_LABELS)
    samples, exclusions = read_samples(manifest, raw)

    assert samples == []
    (exclusion,) = exclusions
    assert exclusion.item == "ClinicalData.xlsx"
    assert "no sheet 'patients'" in exclusion.reason and "'Notes', 'Patients'" in exclusion.reason


def test_a_workbook_that_is_not_one_is_an_exclusion_not_a_crash(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "ClinicalData.xlsx").write_text("ID,Diagnosis\n", encoding="utf-8")
    samples, exclusions = read_samples(make_manifest(_xlsx_layout(), labels=XLSX_LABELS), raw)

    assert samples == [] and "the workbook cannot be read" in exclusions[0].reason


@pytest.mark.parametrize("layout, message", [
    (_xlsx_layout(table="ClinicalData.csv"), r"is not one \(\.xlsx, \.xlsm\)"),
    (_xlsx_layout(delimiter=";"), "its cells need no delimiter"),
])
def test_sheet_and_delimiter_must_fit_the_kind_of_table(layout, message):
    with pytest.raises(ValidationError, match=message):
        make_manifest(layout, labels=XLSX_LABELS)

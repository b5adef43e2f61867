"""Manifest checks beyond structure: every rule finds its defect, names the field and the reason."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from factories import manifest_dict, write_manifest  # noqa: E402

from mmbu.curation.manifest import ManifestError, load_manifest
from mmbu.curation.manifest.validate import find_manifest_files, validate_files
from mmbu.taxonomy import load_taxonomy

TAXONOMY = load_taxonomy()


def problems_of(tmp_path: Path, *documents: dict, stems: tuple[str, ...] = ()) -> list[tuple[str, str, str]]:
    files = [write_manifest(tmp_path, doc, stems[i] if i < len(stems) else None) for i, doc in enumerate(documents)]
    report = validate_files(files, TAXONOMY)
    return [(p.file.name, p.field, p.reason) for p in report.problems]


def test_a_good_manifest_has_no_problems(tmp_path):
    assert problems_of(tmp_path, manifest_dict()) == []


def test_every_structural_error_is_reported_with_the_authors_field_path(tmp_path):
    document = manifest_dict(source={"kind": "zenodo", "record": "not-a-number"}, colour="red")
    del document["title"]
    document["metadata"].pop("modality")
    found = problems_of(tmp_path, document)
    fields = [f for _, f, _ in found]
    assert fields == ["title", "source.record", "metadata.modality", "colour"]
    assert all(name == "blood_cells.yaml" for name, _, _ in found)


def test_load_manifest_raises_with_every_problem(tmp_path):
    path = write_manifest(tmp_path, manifest_dict(tasks=["counting"], license=None))
    with pytest.raises(ManifestError) as caught:
        load_manifest(path)
    assert [f for f, _ in caught.value.problems] == ["license", "tasks.0"]
    assert str(caught.value).startswith(f"{path}: license: ")


def test_unreadable_yaml_is_one_problem_and_the_batch_goes_on(tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text("id: [unclosed\n", encoding="utf-8")
    empty = tmp_path / "empty.yaml"
    empty.write_text("", encoding="utf-8")
    good = write_manifest(tmp_path, manifest_dict())
    report = validate_files([bad, empty, good], TAXONOMY)
    assert report.files == [bad, empty, good]
    assert [(p.file, p.field) for p in report.problems] == [(bad, "(file)"), (empty, "(top level)")]
    assert "not valid YAML" in report.problems[0].reason
    assert "this file is empty" in report.problems[1].reason


def test_id_must_equal_the_stem_and_be_unique(tmp_path):
    found = problems_of(tmp_path, manifest_dict(), manifest_dict(), stems=("blood_cells", "blood_cells_copy"))
    assert ("blood_cells_copy.yaml", "id", "'blood_cells' must equal the file name stem 'blood_cells_copy'") in found
    assert any(f == "id" and "is already the id of" in r and name == "blood_cells_copy.yaml" for name, f, r in found)


@pytest.mark.parametrize("licence, expected", [
    ("GPL-2.0", "deprecated or non-canonical SPDX id; write 'GPL-2.0-only'"),
    ("cc-by-4.0", "write 'CC-BY-4.0'"),
    ("NOASSERTION", "is not a licence"),
    ("other", "is not a licence"),
    ("CC-BY-5.0", "unknown id(s) 'CC-BY-5.0'"),
    ("LicenseRef-scancode-public-domain", "not on the SPDX licence list"),
    ("wxWindows", "deprecated licence id"),
])
def test_licence_must_be_a_current_spdx_id(tmp_path, licence, expected):
    found = problems_of(tmp_path, manifest_dict(license=licence))
    assert len(found) == 1 and found[0][1] == "license"
    assert expected in found[0][2]


@pytest.mark.parametrize("licence", ["CC-BY-4.0", "CC0-1.0", "BSD-3-Clause", "CC-BY-NC-SA-4.0", "MIT OR Apache-2.0"])
def test_current_spdx_ids_and_expressions_pass(tmp_path, licence):
    assert problems_of(tmp_path, manifest_dict(license=licence)) == []


def test_unknown_taxonomy_terms_name_field_value_and_suggestion(tmp_path):
    found = problems_of(tmp_path, manifest_dict(metadata__stain="May-Grunwald Giemza", metadata__specimen_subregion="bloood",
                                                metadata__domain="haematolgy"))
    assert ("blood_cells.yaml", "metadata.domain",
            "'haematolgy' is not a term of the taxonomy facet 'domain'; did you mean 'hematology'?") in found
    assert any(f == "metadata.stain" and "did you mean 'May-Grünwald-Giemsa'?" in r for _, f, r in found)
    assert any(f == "metadata.specimen_subregion" and "facet 'anatomy'" in r and "'blood'" in r for _, f, r in found)


def test_synonyms_and_abbreviations_of_terms_are_accepted(tmp_path):
    document = manifest_dict(metadata__modality="optical microscopy", metadata__sub_modality="bright-field microscopy",
                             metadata__stain="MGG", metadata__domain="haematology")
    assert problems_of(tmp_path, document) == []


def test_sub_modality_must_belong_to_the_modality(tmp_path):
    found = problems_of(tmp_path, manifest_dict(metadata__sub_modality="confocal microscopy"))
    assert found == [("blood_cells.yaml", "metadata.sub_modality",
                      "'confocal microscopy' is a sub-modality of 'fluorescence microscopy', not of 'light microscopy'")]


def test_a_labels_own_sub_modality_must_be_a_term_under_the_modality(tmp_path):
    labels = {"neutrophil": {"name": "neutrophil", "sub_modality": "phase-contrast microscopy"},
              "lymphocyte": {"name": "lymphocyte", "sub_modality": "confocal microscopy"},
              "monocyte": {"name": "monocyte", "sub_modality": "phase contast microscopy"}}
    found = problems_of(tmp_path, manifest_dict(labels=labels, questions={"options_name": "blood cell type",
                                                                          "n_options": 3}))
    assert found == [
        ("blood_cells.yaml", "labels.lymphocyte.sub_modality",
         "'confocal microscopy' is a sub-modality of 'fluorescence microscopy', not of 'light microscopy'"),
        ("blood_cells.yaml", "labels.monocyte.sub_modality",
         "'phase contast microscopy' is not a term of the taxonomy facet 'sub_modality'; "
         "did you mean 'phase contrast microscopy'?")]


def test_mask_task_needs_image_mask_pairs(tmp_path):
    found = problems_of(tmp_path, manifest_dict(tasks=["ungrounded_classification", "mask_grounded_classification"]))
    assert found == [("blood_cells.yaml", "tasks.1",
                      "mask_grounded_classification needs masks: an image_mask_pairs, mask_files or polygons layout, or "
                      "arrays/parquet with masks (this layout is folder_per_class)")]


def test_box_tasks_need_boxes_or_mask_instances(tmp_path):
    masks = {"kind": "image_mask_pairs", "images": "images/*.png", "masks": "masks/*.png",
             "mask_values": {1: "neutrophil"}}
    found = problems_of(tmp_path, manifest_dict(layout=masks, tasks=["mask_grounded_classification", "object_detection"]))
    assert [(f, r.split(";")[0]) for _, f, r in found] == [
        ("tasks.1", "object_detection needs boxes")]
    with_instances = dict(masks, instances="components")
    assert problems_of(tmp_path, manifest_dict(layout=with_instances, tasks=[
        "mask_grounded_classification", "box_grounded_classification", "object_detection"])) == []
    coco = {"kind": "coco", "annotations": "annotations.json"}
    found = problems_of(tmp_path, manifest_dict(layout=coco, tasks=["object_detection", "ungrounded_classification"]))
    assert [f for _, f, _ in found] == ["tasks.1"]


def test_label_display_names_must_not_use_abbreviations(tmp_path):
    labels = {"neutrophil": "neutrophil", "lymphocyte": "lymphocyte", "er": "ER positive cell", "us": "cell seen with US",
              "thus": "thus a monocyte"}
    found = problems_of(tmp_path, manifest_dict(labels=labels, questions={"options_name": "H&E cell type", "n_options": 4}))
    assert ("blood_cells.yaml", "labels.er",
            "display name 'ER positive cell' uses the abbreviation(s) ER; write them out in full") in found
    assert any(f == "labels.us" for _, f, _ in found)
    assert not any(f == "labels.thus" for _, f, _ in found)
    assert any(f == "questions.options_name" and "H&E" in r for _, f, r in found)


def test_the_preparation_is_printed_in_questions_so_it_must_not_use_abbreviations(tmp_path):
    found = problems_of(tmp_path, manifest_dict(questions={"options_name": "cell type", "preparation": "brain MRI slice"}))
    assert found == [("blood_cells.yaml", "questions.preparation",
                      "'brain MRI slice' uses the abbreviation(s) MRI; write them out in full")]


def test_n_options_cannot_exceed_labels_plus_none_of_the_above(tmp_path):
    labels = {"a": "neutrophil", "b": "lymphocyte", "c": "lymphocyte"}  # two distinct display names
    ok = manifest_dict(labels=labels, questions={"options_name": "cell type", "n_options": 3})
    assert problems_of(tmp_path, ok) == []
    too_many = manifest_dict(labels=labels, questions={"options_name": "cell type", "n_options": 4})
    assert problems_of(tmp_path, too_many) == [("blood_cells.yaml", "questions.n_options",
        "4 options asked, but the labels give only 2 distinct display name(s) plus 'None of the above' = 3")]
    no_nota = manifest_dict(labels=labels, questions={"options_name": "cell type", "n_options": 3, "none_of_the_above": False})
    assert [f for _, f, _ in problems_of(tmp_path, no_nota)] == ["questions.n_options"]


def test_n_options_must_offer_a_wrong_label_when_there_is_one(tmp_path):
    """Two labels and n_options 2 asked "benign skin lesion or None of the above" of every benign row."""
    labels = {"b": "benign skin lesion", "m": "malignant skin lesion"}
    two = manifest_dict(labels=labels, questions={"options_name": "skin finding", "n_options": 2})
    assert problems_of(tmp_path, two) == [("blood_cells.yaml", "questions.n_options", (
        "2 option(s) show only the answer and None of the above, which is then the answer on every row: raise it so "
        "that another label or distractor is offered"))]
    assert problems_of(tmp_path, manifest_dict(labels=labels, questions={"options_name": "skin finding",
                                                                         "n_options": 3})) == []


def test_curated_distractors_count_as_options_and_must_be_wrong_for_every_row(tmp_path):
    labels = {"mon": {"name": "monocyte", "synonyms": ["monocytic cell"]}}
    ok = manifest_dict(labels=labels, questions={"options_name": "cell type", "n_options": 4,
                                                 "distractors": ["lymphocyte", "eosinophil"]})
    assert problems_of(tmp_path, ok) == []  # 1 label + 2 distractors + None of the above = 4 options
    bad = manifest_dict(labels=labels, questions={"options_name": "blood cell type", "n_options": 3, "distractors": [
        "lymphocyte", "Lymphocyte", "monocytic cell", "activated monocyte", "blood", "HE stained cell", " "]})
    assert [(f, r) for _, f, r in problems_of(tmp_path, bad)] == [
        ("questions.distractors.1", "'Lymphocyte' is listed twice"),
        ("questions.distractors.2", "'monocytic cell' could be right where the answer is 'monocytic cell' (the same "
                                    "thing, or a kind of it)"),
        ("questions.distractors.3", "'activated monocyte' could be right where the answer is 'monocyte' (the same "
                                    "thing, or a kind of it)"),
        ("questions.distractors.4", "'blood' is named by the question (options_name, preparation or metadata)"),
        ("questions.distractors.5", "'HE stained cell' uses the abbreviation(s) HE; write them out in full"),
        ("questions.distractors.6", "is empty"),
    ]
    # the taxonomy keeps liver under abdomen, and a white blood cell under blood
    organ = manifest_dict(labels={"liv": "liver", "wbc": "leukocyte"}, questions={
        "options_name": "structure", "n_options": 3, "distractors": ["abdomen", "blood", "spleen"]})
    assert [(f, r) for _, f, r in problems_of(tmp_path, organ)] == [
        ("questions.distractors.0", "'abdomen' is, or lies above or under, a taxonomy term of one of the labels"),
        ("questions.distractors.1", "'blood' is, or lies above or under, a taxonomy term of one of the labels")]


def test_labels_declared_by_the_layout_must_be_in_the_vocabulary(tmp_path):
    masks = {"kind": "image_mask_pairs", "images": "images/*.png", "masks": "masks/*.png",
             "mask_values": {1: "neutrophil", 2: "platelet"}}
    found = problems_of(tmp_path, manifest_dict(layout=masks, tasks=["mask_grounded_classification"]))
    assert found == [("blood_cells.yaml", "layout.mask_values.2",
                      "raw label 'platelet' is not in labels (add it with its display name)")]


def test_find_manifest_files_takes_files_and_directories(tmp_path):
    one = write_manifest(tmp_path / "a", manifest_dict())
    two = write_manifest(tmp_path / "b", manifest_dict(id="other"))
    (tmp_path / "b" / "notes.txt").write_text("not a manifest", encoding="utf-8")
    assert find_manifest_files([tmp_path / "b", one]) == [two, one]
    with pytest.raises(FileNotFoundError, match="missing.yaml: no such file"):
        find_manifest_files([tmp_path / "missing.yaml"])


def test_numeric_raw_labels_are_read_as_text(tmp_path):
    labels = {0: "neutrophil", 1: "lymphocyte", 2: "monocyte", 3: "eosinophil"}
    path = write_manifest(tmp_path, manifest_dict(labels=labels))
    manifest = load_manifest(path)
    assert list(manifest.labels) == ["0", "1", "2", "3"]
    assert manifest.label_spec("1").name == "lymphocyte"


def test_display_names_must_read_as_words(tmp_path):
    labels = {"mel": "melanoma_1", "nev": "nevus 0", "bkl": "benign keratosis-like lesion"}
    found = problems_of(tmp_path, manifest_dict(labels=labels, questions={"options_name": "lesion type", "n_options": 4}))
    assert [f for _, f, _ in found] == ["labels.mel", "labels.nev"]
    assert "looks like an identifier" in found[0][2]


def test_mask_max_area_needs_masks_and_urls_must_be_urls(tmp_path):
    found = problems_of(tmp_path, manifest_dict(convert={"slice": "mask_max_area"}, metadata__url="example.org/data",
                                                homepage="ftp://example.org"))
    assert [(f, r.split(",")[0]) for _, f, r in found] == [
        ("convert.slice", "mask_max_area picks the slice with the largest mask"),
        ("metadata.url", "'example.org/data' is not an http(s) URL"),
        ("homepage", "'ftp://example.org' is not an http(s) URL"),
    ]


def test_misspelt_layout_fields_kinds_and_raw_labels_get_a_did_you_mean(tmp_path):
    table = {"kind": "label_table", "table": "labels.csv", "image_colum": "file", "label_column": "dx"}
    found = problems_of(tmp_path, manifest_dict(layout=table))
    assert sorted(found) == [("blood_cells.yaml", "layout.image_colum",
                              "Extra inputs are not permitted; did you mean 'image_column'?"),
                             ("blood_cells.yaml", "layout.image_column", "Field required")]
    found = problems_of(tmp_path, manifest_dict(layout={"kind": "folder_per_clas"}))
    assert len(found) == 1 and found[0][2].endswith("did you mean 'folder_per_class'?")
    masks = {"kind": "image_mask_pairs", "images": "images/*.png", "masks": "masks/*.png",
             "mask_values": {1: "Neutrophil"}}
    found = problems_of(tmp_path, manifest_dict(layout=masks, tasks=["mask_grounded_classification"]))
    assert found[0][2].endswith("; did you mean 'neutrophil'?")


@pytest.mark.parametrize("layout, typo, expected", [
    ({"kind": "mask_files", "image": "i/{id}.jpg", "masks": ["m/{id}_attribute_{a}.png"], "objects": "file",
      "label_part": "a"}, {"empty_mask": "absent"}, "empty_masks"),
    ({"kind": "image_mask_pairs", "images": "i/*.png", "masks": "m/*.png"}, {"mask_colours": {"0,255,0": "Neutrophil"}},
     "mask_colors"),
    ({"kind": "parquet", "files": "data/*.parquet", "label_column": "dx"}, {"image_encodng": "base64"},
     "image_encoding"),
    ({"kind": "polygons", "format": "geojson", "images": "i/{s}.tif", "annotations": "a/{s}.geojson",
      "fixed_label": "Neutrophil"}, {"y_axes": "up"}, "y_axis"),
    ({"kind": "arrays", "items": "file", "images": "i/{s}.npy", "masks": "i/{s}.npy", "instance_label": "Neutrophil"},
     {"mask_axis": "CHW"}, "mask_axes"),
])
def test_the_fields_added_for_the_catalogue_gaps_get_a_did_you_mean(tmp_path, layout, typo, expected):
    found = problems_of(tmp_path, manifest_dict(layout={**layout, **typo}, tasks=["mask_grounded_classification"]))
    assert any(reason.endswith(f"did you mean {expected!r}?") for _, _, reason in found), found


def test_a_misspelt_nested_archives_field_gets_a_did_you_mean(tmp_path):
    source = {"kind": "zenodo", "record": 123, "nested_archive": ["images/*.zip"]}
    found = problems_of(tmp_path, manifest_dict(source=source))
    assert ("blood_cells.yaml", "source.nested_archive",
            "Extra inputs are not permitted; did you mean 'nested_archives'?") in found


def test_a_figshare_source_names_its_article_and_optionally_a_version_and_files(tmp_path):
    good = {"kind": "figshare", "article": 14825193, "version": 2, "files": ["images.zip", "labels.csv"]}
    assert problems_of(tmp_path, manifest_dict(source=good)) == []
    assert problems_of(tmp_path, manifest_dict(source={"kind": "figshare", "article": 14825193})) == []
    bad = {"kind": "figshare", "article": 0, "version": 0, "files": ["../../etc/passwd"], "record": 1}
    found = {field: reason for _, field, reason in problems_of(tmp_path, manifest_dict(source=bad))}
    assert sorted(found) == ["source.article", "source.files.0", "source.record", "source.version"], found
    assert "greater than 0" in found["source.article"] and "greater than 0" in found["source.version"]
    assert "raw/<id>/" in found["source.files.0"]
    assert problems_of(tmp_path, manifest_dict(source={"kind": "figshare", "articel": 5}))[0][1:] == (
        "source.article", "Field required")

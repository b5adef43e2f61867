"""Prototype rendering: fragments that drop when empty or repeated, articles, rewrites, no answer leaks."""
from __future__ import annotations

from dataclasses import replace

import pytest
from support.build_manifests import make_manifest, write_taxonomy
from support.question_rows import placed_item

from mmbu.build.questions import QuestionRow, instantiate_questions, lint_questions, load_prototypes
from mmbu.build.questions.prototypes import with_article

BASE = {"options_name": "structure", "modality": "digital pathology", "sub_modality": "whole-slide brightfield imaging",
        "stain": "hematoxylin and eosin", "specimen": "tissue section", "anatomy": None,
        "preparation": "tissue section"}


def full(values):
    return load_prototypes().render("ungrounded_classification", values)["question_full_context"]


def test_names_ending_in_imaging_read_as_images_and_repeated_values_are_said_once():
    assert full(BASE) == ("Which structure is most consistent with the visual features in this whole-slide "
                          "brightfield image (digital pathology) of a tissue section, stained with hematoxylin "
                          "and eosin?")


def test_radiology_contrast_phrase_and_missing_fields():
    question = full({**BASE, "modality": "magnetic resonance imaging", "sub_modality": None, "stain": "T1-weighted",
                     "specimen": "human", "anatomy": "liver", "preparation": None})
    assert question.endswith("in this magnetic resonance image of the human liver, acquired as a T1-weighted sequence?")


@pytest.mark.parametrize("noun, phrase", [("smear", "a smear"), ("imprint", "an imprint"),
                                          ("cultured cells", "cultured cells"), ("cross section", "a cross section"),
                                          ("urine sediment", "a urine sediment"), ("unstained smear", "an unstained smear"),
                                          ("environmental sample", "an environmental sample")])
def test_preparation_articles(noun, phrase):
    assert with_article(noun) == phrase


def test_a_specimen_named_by_its_preparation_is_not_said_twice_and_unstained_is_no_stain():
    """Not "of a smear of blood smear blood" (preparation smear, specimen blood smear, anatomy blood), "stained with
    unstained" nor "from a environmental sample specimen"."""
    smear = {**BASE, "modality": "light microscopy", "sub_modality": "brightfield microscopy", "stain": "Giemsa",
             "specimen": "blood smear", "anatomy": "blood", "preparation": "smear"}
    assert full(smear).endswith("(light microscopy) of a smear of blood, stained with Giemsa?")
    assert full({**smear, "stain": "unstained", "anatomy": None}).endswith("(light microscopy) of a smear, unstained?")
    sample = {**smear, "stain": None, "specimen": "environmental sample", "anatomy": None, "preparation": None}
    assert full(sample).endswith("(light microscopy) from an environmental sample specimen?")


def one_question(manifest, taxonomy, label, **metadata) -> QuestionRow:
    """The question row of one ungrounded item of `label` from a human specimen with `metadata`."""
    row = placed_item(manifest.id, label, **{"specimen": "human", **metadata})
    (question,), _ = instantiate_questions([row], manifest, taxonomy, seed=1)
    return question


def reworded(row: QuestionRow, **questions: str) -> QuestionRow:
    return replace(row, questions={**row.questions, **questions})


def test_context_that_names_a_label_is_withheld_and_the_lint_catches_leaks(tmp_path):
    taxonomy = write_taxonomy(tmp_path)
    manifest = make_manifest({"kind": "folder_per_class"}, labels={"chest": "chest", "breast": "breast"},
                             questions={"options_name": "body region", "preparation": None})
    question = one_question(manifest, taxonomy, "chest", modality="computed tomography",
                            sub_modality="conventional computed tomography", specimen_subregion="chest")
    # the patient of a CT is no specimen, and the anatomy that names a label is withheld: nothing more is said
    assert question.questions["question_full_context"].endswith("in this conventional computed tomography image?")
    assert lint_questions([question], taxonomy).empty

    leaky = reworded(question, question_modality="Which body region is shown in this chest image?")
    failures = lint_questions([leaky], taxonomy)
    assert list(zip(failures.template, failures.category, failures.word)) == [("modality", "answer_leak", "chest")]


def test_a_context_value_naming_a_label_in_the_plural_is_withheld_and_linted(tmp_path):
    """chase_db1's anatomy "retinal blood vessels" named its only label, "retinal blood vessel"."""
    taxonomy = write_taxonomy(tmp_path)
    manifest = make_manifest({"kind": "folder_per_class"}, labels={"vessel": "retinal blood vessel", "disc": "optic disc"},
                             questions={"options_name": "retinal structure", "preparation": None})
    question = one_question(manifest, taxonomy, "vessel", modality="light microscopy", sub_modality=None,
                            specimen_subregion="retinal blood vessels")
    assert question.questions["question_full_context"].endswith("in this light microscopy image from a human specimen?")
    leaky = reworded(question,
                     question_full_context="Which retinal structure is outlined among these retinal blood vessels?")
    failures = lint_questions([leaky], taxonomy)
    assert list(zip(failures.template, failures.category, failures.word)) == [
        ("full_context", "answer_leak", "retinal blood vessel")]


def test_capital_tokens_of_canonical_taxonomy_names_are_not_abbreviations(tmp_path):
    from mmbu.build.questions.lint import wording_lint

    taxonomy = write_taxonomy(tmp_path)
    taxonomy.facets["stain"].terms.append(taxonomy.terms("stain")[0].model_copy(
        update={"id": "t1", "name": "T1-weighted", "synonyms": (), "abbreviations": ()}))
    lint = wording_lint(taxonomy)
    assert lint.hits("acquired as a T1-weighted sequence") == []
    assert [h.word for h in lint.hits("acquired as a T2 sequence")] == ["T2"]


def test_a_cellular_anatomy_is_not_what_the_image_is_of(tmp_path):
    """Not "... (fluorescence microscopy) of cell culture nucleus" nor "of a tissue section of nucleus"."""
    from support.build_manifests import write_png

    from mmbu.taxonomy.model import load_taxonomy

    taxonomy = load_taxonomy()
    manifest = make_manifest({"kind": "coco", "annotations": "a.json"}, tasks=["object_detection"],
                             labels={"nucleus": "cell nucleus"}, questions={"options_name": "structure",
                                                                              "preparation": None})
    image = write_png(tmp_path / "a.png", size=(64, 64))
    detection = {"task": "object_detection", "image": image, "size": (64, 64), "boxes": [[1, 1, 9, 9]],
                 "other_boxes": [], "modality": "fluorescence microscopy"}
    row = placed_item(manifest.id, "nucleus", specimen="cell culture", specimen_subregion="nucleus", **detection)
    organ = placed_item(manifest.id, "nucleus", sample_id="demo_marrow-0000000000000002", specimen="human",
                        specimen_subregion="liver", **detection)
    questions, _ = instantiate_questions([row, organ], manifest, taxonomy, seed=1)
    assert [q.questions["question_full_context"] for q in questions] == [
        "Locate every cell nucleus in this fluorescence microscopy image from a cell culture specimen.",
        "Locate every cell nucleus in this fluorescence microscopy image of the human liver."]

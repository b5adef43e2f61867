"""The wording rules catch what the issue found in the demo and the catalogue, and the prototypes pass them."""
from __future__ import annotations

import pytest
from support.build_manifests import make_manifest, write_png
from support.question_rows import placed_item

from mmbu.build.questions import answer_aliases, instantiate_questions, load_prototypes, rows_frame
from mmbu.build.questions.wording_rules import RULES, wording_problems
from mmbu.taxonomy.model import load_taxonomy

MRI = {"modality": "magnetic resonance imaging", "sub_modality": "structural magnetic resonance imaging",
       "stain": None, "specimen": "human", "specimen_subregion": "abdomen"}


@pytest.fixture(scope="module")
def taxonomy():
    return load_taxonomy()


def rules_found(rows, manifest, taxonomy) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for problem in wording_problems(rows, manifest, taxonomy):
        found.setdefault(problem.rule, []).append(problem.detail)
    return found


def row(**fields):
    return {"sample_id": "demo_marrow-0000000000000001", "dataset_id": "demo_marrow", "task": "ungrounded_classification",
            "label": "liver", "target": None, "options": ["liver", "kidney", "None of the above"],
            "answer_aliases": [], **MRI, **fields}


def questions(**fields):
    """A row whose three questions are one text (the rules read each distinct text once)."""
    text = fields.pop("question")
    return [row(question_no_context=text, question_modality=text, question_full_context=text, **fields)]


def test_every_rule_catches_what_the_issue_found(taxonomy):
    manifest = make_manifest({"kind": "folder_per_class"}, labels={"liver": "liver", "kidney": "kidney"},
                             questions={"options_name": "organ", "preparation": None})
    cases = {
        "article": "Which organ is most consistent with the visual features in this structural magnetic resonance "
                   "image of human abdomen?",
        "specimen": "Which organ is most consistent with the visual features in this structural magnetic resonance "
                    "image from a human specimen?",
        "modality_twice": "Which organ is most consistent with the visual features in this structural magnetic "
                          "resonance image (magnetic resonance imaging) of the human abdomen?",
        "picture": "Which organ is most consistent with the visual features in this laparoscopy image of a "
                   "laparoscopic video frame of the human abdomen?",
    }
    for rule, text in cases.items():
        assert set(rules_found(questions(question=text), manifest, taxonomy)) == {rule}, rule
    detection = {"task": "object_detection", "target": "fat", "options": ["[1, 1, 5, 5]", "[9, 9, 13, 13]"]}
    found = rules_found(questions(question="Locate every fat in this image.", **detection), manifest, taxonomy)
    assert list(found) == ["number"]
    found = rules_found(questions(question="Locate all cell nucleus in this image.",
                                  **{**detection, "target": "cell nucleus"}), manifest, taxonomy)
    assert list(found) == ["number"]
    aliases = questions(question="Which organ is shown in this image?", answer_aliases=["marked_lesion", "liver lesion"])
    assert rules_found(aliases, manifest, taxonomy) == {"alias": ["'marked_lesion' is a folder or file name"]}
    assert set(RULES) == {*cases, "number", "alias", "options_noun"}


def test_an_options_noun_of_findings_fits_no_normal_anatomy(taxonomy):
    """demo_mri_liver_overlay asked "Which finding ...?" over portal vein, gallbladder and inferior vena cava."""
    found_over = {"focal liver lesion", "portal vein", "gallbladder", "inferior vena cava", "lateral ventricle"}
    rows = questions(question="Which finding is shown in this image?",
                     options=[*sorted(found_over), "None of the above"])
    finding = make_manifest({"kind": "folder_per_class"}, labels={"l": "focal liver lesion"},
                            questions={"options_name": "finding"})
    found = rules_found(rows, finding, taxonomy)["options_noun"]
    assert sorted(found) == ["'gallbladder' is no finding", "'inferior vena cava' is no finding",
                             "'lateral ventricle' is no finding", "'portal vein' is no finding"]
    either = make_manifest({"kind": "folder_per_class"}, labels={"l": "focal liver lesion"},
                           questions={"options_name": "structure or finding"})
    assert "options_noun" not in rules_found(rows, either, taxonomy)


def test_the_prototypes_write_what_the_rules_want(tmp_path, taxonomy):
    manifest = make_manifest({"kind": "coco", "annotations": "a.json"}, tasks=["object_detection"],
                             labels={"lesion": "focal liver lesion", "fat": "fat", "vesicles": "seminal vesicles"},
                             questions={"options_name": "structure or finding", "preparation": None})
    image = write_png(tmp_path / "a.png", size=(200, 160))
    rows = [placed_item("demo_marrow", raw, sample_id=f"demo_marrow-000000000000000{k}", task="object_detection",
                        image=image, size=(200, 160), boxes=[[10, 10, 30, 30]], other_boxes=[], **MRI)
            for k, raw in enumerate(("lesion", "fat", "vesicles"))]
    made, dropped = instantiate_questions(rows, manifest, taxonomy, seed=1)
    assert dropped == [] and wording_problems([row.record() for row in made], manifest, taxonomy) == []
    made = rows_frame(made)
    assert list(made.question_full_context) == [
        "Locate every focal liver lesion in this structural magnetic resonance image of the human abdomen.",
        "Locate all fat in this structural magnetic resonance image of the human abdomen.",
        "Locate all seminal vesicles in this structural magnetic resonance image of the human abdomen."]
    assert list(made.closed_question_no_context) == [
        "Which box contains a focal liver lesion in this image?", "Which box contains fat in this image?",
        "Which box contains seminal vesicles in this image?"]


@pytest.mark.parametrize("phrase, number", [("cell nucleus", "one"), ("fat", "mass"), ("connective tissue", "mass"),
                                            ("overlapping nuclei", "plural"), ("scissors", "plural"),
                                            ("bipolar forceps", "one"), ("pancreas", "one"), ("Actinophrys", "one"),
                                            ("peripheral zone of the prostate", "one"), ("dental caries", "mass")])
def test_how_a_noun_phrase_counts(phrase, number):
    assert load_prototypes().number(phrase) == number


def test_a_folder_name_is_no_answer_alias(taxonomy):
    manifest = make_manifest({"kind": "folder_per_class"}, labels={
        "marked_lesion": {"name": "focal liver lesion", "synonyms": ["liver lesion"]}, "kidney": "kidney"})
    assert answer_aliases("marked_lesion", manifest, taxonomy) == ["liver lesion"]

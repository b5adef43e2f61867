"""Questions: the three templates, fixed-size seeded options, detection boxes, aliases and the wording lint."""
from __future__ import annotations


import random

import pytest
from support.build_manifests import make_manifest, write_png, write_taxonomy
from support.question_rows import as_placed, placed_item

from mmbu.build.layouts import read_samples
from mmbu.build.metadata import normalise_metadata, validate_metadata
from mmbu.build.questions import (
    answer_aliases,
    attach_metadata,
    drop_lint_failures,
    format_lint_report,
    instantiate_questions,
    iou,
    lint_labels,
    lint_questions,
    rows_frame,
    task_items,
)
from mmbu.taxonomy.model import load_taxonomy

NOTA = "None of the above"


@pytest.fixture
def taxonomy(tmp_path):
    return write_taxonomy(tmp_path)


def build_rows(raw, manifest, taxonomy):
    samples, _ = read_samples(manifest, raw)
    valid, failures = validate_metadata(normalise_metadata(samples, manifest, taxonomy), taxonomy)
    assert failures.empty
    items, dropped = attach_metadata(task_items(samples, manifest), valid)
    assert dropped == []
    return as_placed(items)


def ask(rows, manifest, taxonomy, seed, **options):
    """The question rows as the rows step writes them (`rows_frame`), and what was dropped."""
    questions, dropped = instantiate_questions(rows, manifest, taxonomy, seed, **options)
    return rows_frame(questions), dropped


@pytest.fixture
def marrow(tmp_path):
    raw = tmp_path / "raw"
    for label in ("MON", "PMY", "EBO", "BNE", "LYT", "EOS"):
        for k in range(4):
            write_png(raw / label / f"{label.lower()}_{k}.png", value=k)
    return raw


def test_three_templates_follow_the_bone_marrow_example(marrow, taxonomy):
    manifest = make_manifest({"kind": "folder_per_class"})
    questions, dropped = ask(build_rows(marrow, manifest, taxonomy), manifest, taxonomy, seed=7)
    assert dropped == []
    row = questions.iloc[0]
    assert row.question_no_context == (
        "Which myeloid lineage cell type is most consistent with the visual features in this image?")
    assert row.question_modality == ("Which myeloid lineage cell type is most consistent with the visual features "
                                     "in this light microscopy image?")
    assert row.question_full_context == (
        "Which myeloid lineage cell type is most consistent with the visual features in this brightfield "
        "microscopy image (light microscopy) of a smear of human bone marrow, stained with May-Grünwald-Giemsa?")
    assert row.question_version == "mmbu-questions-v7"


def test_a_sub_modality_that_tells_the_classes_apart_is_named_in_no_question(tmp_path, taxonomy):
    raw = tmp_path / "raw"
    for label in ("MON", "PMY"):
        write_png(raw / label / "a.png")
        write_png(raw / label / "b.png")
    labels = {"MON": "monocyte", "PMY": {"name": "promyelocyte", "sub_modality": "phase contrast microscopy"}}
    manifest = make_manifest({"kind": "folder_per_class"}, labels=labels, questions={"n_options": 3})
    questions, dropped = ask(build_rows(raw, manifest, taxonomy), manifest, taxonomy, seed=7)
    assert dropped == [] and sorted(set(questions.label)) == ["monocyte", "promyelocyte"]
    assert dict(zip(questions.label, questions.sub_modality)) == {
        "monocyte": "brightfield microscopy", "promyelocyte": "phase contrast microscopy"}
    # both classes' rows read alike: the phase contrast rows do not say so, nor do the others say "brightfield"
    assert set(questions.question_full_context) == {
        "Which myeloid lineage cell type is most consistent with the visual features in this light microscopy image "
        "of a smear of human bone marrow, stained with May-Grünwald-Giemsa?"}


def test_options_are_fixed_in_size_contain_the_answer_and_are_stable_across_rebuilds(marrow, taxonomy):
    manifest = make_manifest({"kind": "folder_per_class"})
    rows = build_rows(marrow, manifest, taxonomy)
    first, _ = ask(rows, manifest, taxonomy, seed=7)
    shuffled = random.Random(3).sample(rows, len(rows))
    again, _ = ask(shuffled, manifest, taxonomy, seed=7)
    other_seed, _ = ask(rows, manifest, taxonomy, seed=8)

    assert len(first) == 24
    assert all(len(opts) == 5 and NOTA in opts and ans in opts and ans == lab
               for opts, ans, lab in zip(first.options, first.answer, first.label))
    assert all(len(set(opts)) == 5 for opts in first.options)
    labels = {"monocyte", "promyelocyte", "proerythroblast", "band neutrophil", "lymphocyte", "eosinophil"}
    assert all(set(opts) - {NOTA} <= labels for opts in first.options)
    by_id = dict(zip(again.sample_id, again.options))
    assert all(by_id[sid] == opts for sid, opts in zip(first.sample_id, first.options))
    assert list(first.options) != list(other_seed.options)
    # the gold label lands in every position over the dataset, so position carries no signal
    assert {opts.index(ans) for opts, ans in zip(first.options, first.answer)} == set(range(5))


def test_small_label_sets_keep_one_option_count_for_the_dataset(tmp_path, taxonomy):
    raw = tmp_path / "raw"
    for label in ("MON", "PMY"):
        write_png(raw / label / "a.png")
        write_png(raw / label / "b.png")
    manifest = make_manifest({"kind": "folder_per_class"}, labels={"MON": "monocyte", "PMY": "promyelocyte"})
    questions, _ = ask(build_rows(raw, manifest, taxonomy), manifest, taxonomy, seed=1)
    assert {len(opts) for opts in questions.options} == {3}
    without_none = make_manifest({"kind": "folder_per_class"}, labels={"MON": "monocyte", "PMY": "promyelocyte"},
                                 questions={"none_of_the_above": False, "n_options": 4})
    questions, _ = ask(build_rows(raw, without_none, taxonomy), without_none, taxonomy, seed=1)
    assert all(sorted(opts) == ["monocyte", "promyelocyte"] for opts in questions.options)


def test_none_of_the_above_as_the_answer_when_asked_for(marrow, taxonomy):
    manifest = make_manifest({"kind": "folder_per_class"})
    questions, _ = ask(build_rows(marrow, manifest, taxonomy), manifest, taxonomy, seed=7,
                                         none_answer_rate=0.5)
    left_out = questions[questions.answer == NOTA]
    assert 4 <= len(left_out) <= 20
    assert all(lab not in opts and len(opts) == 5 for lab, opts in zip(left_out.label, left_out.options))
    assert set(questions[questions.answer != NOTA].apply(lambda r: r.answer == r.label, axis=1)) == {True}


def test_a_dataset_with_one_label_draws_wrong_options_from_its_curated_distractors(tmp_path, taxonomy):
    """Without them its closed question was "monocyte or None of the above", answered by any model that never says
    none; the dataset's own labels still come first, and a dataset with enough of them draws as it always did."""
    raw = tmp_path / "raw"
    for k in range(12):
        write_png(raw / "MON" / f"mon_{k}.png", value=k)
    distractors = ["promyelocyte", "proerythroblast", "band neutrophil", "lymphocyte", "eosinophil"]
    manifest = make_manifest({"kind": "folder_per_class"}, labels={"MON": "monocyte"},
                             questions={"n_options": 5, "distractors": distractors})
    questions, dropped = ask(build_rows(raw, manifest, taxonomy), manifest, taxonomy, seed=3)
    assert dropped == [] and len(questions) == 12
    for options, answer in zip(questions.options, questions.answer):
        assert answer == "monocyte" and len(options) == 5 and options.count("monocyte") == 1
        assert options.count(NOTA) == 1 and set(options) - {"monocyte", NOTA} <= set(distractors)
    assert len({tuple(o) for o in questions.options}) > 1  # drawn per row, not one fixed list
    again, _ = ask(build_rows(raw, manifest, taxonomy), manifest, taxonomy, seed=3)
    assert again.options.tolist() == questions.options.tolist()


def test_distractors_do_not_change_a_dataset_with_enough_labels(marrow, taxonomy):
    plain = make_manifest({"kind": "folder_per_class"})
    curated = make_manifest({"kind": "folder_per_class"}, questions={"distractors": ["platelet", "basophil"]})
    before, _ = ask(build_rows(marrow, plain, taxonomy), plain, taxonomy, seed=7)
    after, _ = ask(build_rows(marrow, curated, taxonomy), curated, taxonomy, seed=7)
    assert after.options.tolist() == before.options.tolist()


def test_answer_aliases_come_from_manifest_and_taxonomy(marrow, taxonomy):
    manifest = make_manifest({"kind": "folder_per_class"})
    questions, _ = ask(build_rows(marrow, manifest, taxonomy), manifest, taxonomy, seed=7)
    monocyte = questions[questions.label == "monocyte"].iloc[0]
    # the manifest's synonym and raw key; the taxonomy term's synonyms ("monocytes") are the judge's to weigh
    assert monocyte.answer_aliases == ["mono", "MON"]
    assert questions[questions.label == "lymphocyte"].iloc[0].answer_aliases == ["LYT"]


def detection_rows(manifest, boxes, others, image, size=(200, 160)):
    """Detection items on one real PNG (`image`, written by Pillow at `size`)."""
    write_png(image, size=size)
    return [placed_item(manifest.id, "ring", sample_id=f"demo_marrow-{k:016x}", task="object_detection",
                        source_path=f"img{k}.png", image=image, size=size, boxes=boxes, other_boxes=others,
                        modality="light microscopy", sub_modality="brightfield microscopy", specimen="human")
            for k in range(30)]


def test_detection_options_are_one_instance_and_boxes_that_hold_none(taxonomy, tmp_path):
    manifest = make_manifest({"kind": "coco", "annotations": "a.json"}, tasks=["object_detection"],
                             labels={"ring": "ring-stage parasite", "rbc": "red blood cell"})
    gold = [[10, 10, 50, 40], [100, 90, 130, 120]]
    questions, dropped = ask(detection_rows(manifest, gold, [[60, 60, 90, 90]], tmp_path / "a.png"), manifest,
                             taxonomy, seed=3)
    assert dropped == []
    for row in questions.itertuples():
        assert row.answer == "[10, 10, 50, 40]" and row.answer in row.options and len(row.options) == 5
        assert NOTA in row.options and row.answer_aliases == []
        assert row.question_modality == "Locate every ring-stage parasite in this light microscopy image."
        assert row.closed_question_modality == "Which box contains a ring-stage parasite in this light microscopy image?"
        boxes = [[int(v) for v in o.strip("[]").split(", ")] for o in row.options if o not in (NOTA, row.answer)]
        assert len(boxes) == 3
        for box in boxes:
            assert 0 <= box[0] < box[2] <= 200 and 0 <= box[1] < box[3] <= 160
            assert (box[2] - box[0], box[3] - box[1]) == (40, 30)  # the answer's size
            assert iou(box, gold[0]) == 0  # apart from the answer
            for g in gold:  # no instance's centre, at most a tenth of an instance's box
                assert not (box[0] <= (g[0] + g[2]) / 2 < box[2] and box[1] <= (g[1] + g[3]) / 2 < box[3])
                covered = max(0, min(box[2], g[2]) - max(box[0], g[0])) * max(0, min(box[3], g[3]) - max(box[1], g[1]))
                assert covered <= 0.1 * (g[2] - g[0]) * (g[3] - g[1])
    # a box of the answer's size centred on the other object is a natural wrong option, and is used
    assert any("[55, 60, 95, 90]" in opts for opts in questions.options)


def test_detection_never_offers_the_gold_box_alone(taxonomy, tmp_path):
    manifest = make_manifest({"kind": "coco", "annotations": "a.json"}, tasks=["object_detection"],
                             labels={"ring": "ring-stage parasite"}, questions={"n_options": 2})
    questions, _ = ask(detection_rows(manifest, [[10, 10, 50, 40]], [], tmp_path / "a.png")[:3], manifest, taxonomy,
                       seed=3)
    assert all(len(opts) == 3 and NOTA in opts for opts in questions.options)


def test_detection_without_room_for_distractors_is_excluded(taxonomy, tmp_path):
    manifest = make_manifest({"kind": "coco", "annotations": "a.json"}, tasks=["object_detection"],
                             labels={"ring": "ring-stage parasite"})
    rows = detection_rows(manifest, [[0, 0, 20, 20]], [], tmp_path / "a.png", size=(20, 20))[:1]
    questions, dropped = ask(rows, manifest, taxonomy, seed=3)
    assert questions.empty and dropped[0].reason == (
        "no room on the image's content for 3 wrong box(es) of the answer's size clear of every ring-stage parasite "
        "and of each other")


def test_task_items_expand_regions_into_grounded_and_detection_rows(tmp_path, taxonomy):
    import json
    raw = tmp_path / "raw"
    write_png(raw / "a.png", size=(100, 80))
    (raw / "ann.json").write_text(json.dumps({
        "images": [{"id": 1, "file_name": "a.png", "width": 100, "height": 80}],
        "categories": [{"id": 1, "name": "ring"}, {"id": 2, "name": "rbc"}],
        "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 1, 10, 10]},
                        {"id": 2, "image_id": 1, "category_id": 1, "bbox": [50, 50, 10, 10]},
                        {"id": 3, "image_id": 1, "category_id": 2, "bbox": [20, 20, 10, 10]}]}))
    manifest = make_manifest({"kind": "coco", "annotations": "ann.json"},
                             tasks=["box_grounded_classification", "object_detection"],
                             labels={"ring": "ring-stage parasite", "rbc": "red blood cell"})
    samples, _ = read_samples(manifest, raw)
    items = task_items(samples, manifest)
    assert [i.task for i in items] == ["box_grounded_classification"] * 3 + ["object_detection"] * 2
    grounded = [i for i in items if i.task == "box_grounded_classification"]
    assert [(i.region.instance, i.boxes) for i in grounded] == [(r.instance, (r.box,)) for r in samples[0].regions]
    detect = {i.target: i for i in items if i.task == "object_detection"}
    assert detect["ring"].boxes == ((1.0, 1.0, 11.0, 11.0), (50.0, 50.0, 60.0, 60.0))
    assert detect["ring"].other_boxes == ((20.0, 20.0, 30.0, 30.0),) and detect["ring"].region is None
    assert len({i.sample_id for i in items}) == 5 and all(i.sample is samples[0] for i in items)
    assert [i.sample_id for i in task_items(samples, manifest)] == [i.sample_id for i in items]


def test_lint_flags_forbidden_wording_but_not_label_text(marrow, taxonomy):
    manifest = make_manifest({"kind": "folder_per_class"}, questions={"options_name": "malignant RBC type"})
    questions, _ = instantiate_questions(build_rows(marrow, manifest, taxonomy)[:2], manifest, taxonomy, seed=1)
    failures = lint_questions(questions, taxonomy)
    assert set(zip(failures.category, failures.word)) == {("malignancy", "malignant"), ("abbreviation", "RBC")}
    assert len(failures) == 2 * 3 * 2  # 2 rows x 3 templates x 2 words
    assert set(failures.template) == {"no_context", "modality", "full_context"}
    report = format_lint_report(failures)
    assert "malignancy word 'malignant'" in report and "[ungrounded_classification/no_context]" in report
    kept, rejected = drop_lint_failures(questions, failures)
    assert kept == [] and len(rejected) == 2 and {e.stage for e in rejected} == {"lint"}
    assert "'malignant' (malignancy, no_context)" in rejected[0].reason

    clean = make_manifest({"kind": "folder_per_class"})
    questions, _ = instantiate_questions(build_rows(marrow, clean, taxonomy), clean, taxonomy, seed=1)
    assert lint_questions(questions, taxonomy).empty
    assert format_lint_report(lint_questions(questions, taxonomy)) == "wording lint: every question is clean"


def test_detection_targets_are_exempt_and_disease_like_labels_are_warnings(taxonomy, tmp_path):
    manifest = make_manifest({"kind": "coco", "annotations": "a.json"}, tasks=["object_detection"],
                             labels={"ring": "tumour nodule"})
    rows = detection_rows(manifest, [[10, 10, 50, 40]], [], tmp_path / "a.png")[:1]
    questions, _ = instantiate_questions(rows, manifest, taxonomy, seed=3)
    assert "tumour nodule" in questions[0].questions["question_no_context"]
    assert "tumour nodule" in questions[0].questions["closed_question_no_context"]
    assert lint_questions(questions, taxonomy).empty
    warnings = lint_labels(["tumour nodule", "monocyte", "CT finding"], taxonomy)
    assert set(zip(warnings.label, warnings.word)) == {("tumour nodule", "tumour"), ("CT finding", "CT")}


def test_lint_catches_taxonomy_abbreviations_and_plurals(taxonomy):
    from mmbu.build.questions.lint import wording_lint
    lint = wording_lint(taxonomy)
    words = {hit.word for hit in lint.hits("Tumors seen with H&E; use MGG here, HE too, he said (e.g. metastases).")}
    assert words == {"Tumors", "H&E", "MGG", "HE", "e.g.", "metastases"}
    assert lint.hits("this brightfield microscopy image of a smear") == []


def test_a_label_that_is_only_a_synonym_of_a_taxonomy_term_takes_none_of_the_terms_other_names():
    """"artery" resolves to the term blood vessel, whose synonyms include "vein"; "Plasmodium falciparum" to the term
    Plasmodium, whose synonyms include "Plasmodium vivax": neither answer is the label."""
    taxonomy = load_taxonomy()
    manifest = make_manifest({"kind": "folder_per_class"}, labels={
        "artery": "artery", "liver": "liver", "Falciparum": {"name": "Plasmodium falciparum", "synonyms": ["falciparum"]},
        "Vivax": {"name": "Plasmodium vivax", "synonyms": ["vivax"]}, "3": "spleen", "B": "blurred frame"})
    assert answer_aliases("artery", manifest, taxonomy) == []
    # the term's own canonical name: its name and abbreviations, never the synonyms that map source values onto it
    # ("hepatic"; gallbladder's "bile ducts", "biliary tree"), which the judge, not the pre-check, weighs
    assert answer_aliases("liver", manifest, taxonomy) == []
    assert answer_aliases("Falciparum", manifest, taxonomy) == ["falciparum"]
    assert answer_aliases("Vivax", manifest, taxonomy) == ["vivax"]
    assert "3" not in answer_aliases("3", manifest, taxonomy)  # a numeric raw label is a code, not a wording
    assert answer_aliases("B", manifest, taxonomy) == []  # so is a single letter


def test_a_wording_two_labels_share_is_an_alias_of_neither():
    taxonomy = load_taxonomy()
    manifest = make_manifest({"kind": "folder_per_class"}, labels={
        "1": {"name": "chronic stroke lesion", "synonyms": ["lesion", "stroke lesion"]},
        "2": {"name": "tumour", "synonyms": ["lesion"]}, "3": {"name": "breast lesion", "synonyms": ["tumour", "mass"]}})
    assert answer_aliases("1", manifest, taxonomy) == ["stroke lesion"]
    assert answer_aliases("2", manifest, taxonomy) == []
    assert answer_aliases("3", manifest, taxonomy) == ["mass"]


def test_an_alias_the_question_says_is_not_an_accepted_answer(tmp_path):
    """"Which cell type ...?" would otherwise accept the reply "cell" for "brain cell"."""
    taxonomy = write_taxonomy(tmp_path)
    manifest = make_manifest({"kind": "folder_per_class"}, labels={
        "cell": {"name": "brain cell", "synonyms": ["cell", "neuron or glial cell"]}, "vessel": "capillary"},
        questions={"options_name": "cell type", "n_options": 2})
    rows = [placed_item(manifest.id, "cell", modality="light microscopy", specimen="human")]
    questions, _ = ask(rows, manifest, taxonomy, seed=1)
    assert questions.iloc[0].question_no_context.startswith("Which cell type")
    assert questions.iloc[0].answer_aliases == ["neuron or glial cell"]

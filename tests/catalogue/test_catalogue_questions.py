"""What the real catalogue's manifests make a model read: every label of every manifest, in every task the manifest
asks for, instantiated through the build's own steps (metadata, task items, questions, wording lint) from one
synthetic sample per label. No data is fetched: questions depend only on the manifest and the taxonomy.
"""
from __future__ import annotations

import re
import tempfile
from functools import lru_cache
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image
from support import content_images
from support.catalogue_replica import catalogue_manifests
from support.question_rows import on_image

from mmbu.benchmark_eval.parser import normalise_label_text
from mmbu.build.layouts.sample import Region, Sample, make_sample_id
from mmbu.build.metadata import normalise_metadata, validate_metadata
from mmbu.build.questions import (QuestionRow, attach_metadata, instantiate_questions, lint_questions, load_prototypes,
                                  rows_frame, task_items)
from mmbu.build.questions.box_options import box_option_problems
from mmbu.build.questions.content import read_content_mask
from mmbu.build.questions.wording_rules import wording_problems
from mmbu.core.wording import kind_of
from mmbu.taxonomy.model import load_taxonomy

MANIFESTS = {m.id: m for m in catalogue_manifests()}
IMAGE_SIZE = (512, 512)
# each label's two instances, inside the picture of every synthetic image below (all 512 pixels wide or more)
INSTANCES = ((200, 200, 250, 250), (290, 250, 330, 290))
# the synthetic picture a dataset's detection rows are asked on, by modality: what surrounds its content
PICTURES = {"computed tomography": content_images.ct_slice, "magnetic resonance imaging": content_images.ct_slice,
            "x-ray imaging": content_images.ct_slice, "ultrasound imaging": content_images.ct_slice,
            "endoscopy": content_images.endoscopy, "optical imaging": content_images.fundus,
            "clinical photography": content_images.fundus,
            "fluorescence microscopy": lambda: content_images.fluorescence_field(nuclei=60)[:2]}
_pictures: dict[object, Path] = {}  # picture maker -> its file
_folder: list[tempfile.TemporaryDirectory] = []


@lru_cache(maxsize=1)
def taxonomy():
    return load_taxonomy()


def picture(modality: str) -> Path:
    """The synthetic picture (written once per module) detection rows of a modality are asked on."""
    make = PICTURES.get(modality, content_images.tissue_field)
    if make not in _pictures:
        if not _folder:
            _folder.append(tempfile.TemporaryDirectory(prefix="catalogue-pictures-"))
        image, _ = make()
        _pictures[make] = Path(_folder[0].name) / f"picture_{len(_pictures)}.png"
        image.save(_pictures[make])
    return _pictures[make]


def samples(manifest) -> list[Sample]:
    """One sample per raw label: that label as the image's label and as two boxed regions (two instances of it)."""
    found = []
    for index, raw in enumerate(manifest.labels):
        path = f"label_{index}.png"
        regions = tuple(Region(label=raw, instance=str(k), box=box, mask_value=1) for k, box in enumerate(INSTANCES))
        found.append(Sample(sample_id=make_sample_id(manifest.id, path), dataset_id=manifest.id, source_path=path,
                            image_path=Path(path), label=raw, image_size=IMAGE_SIZE, regions=regions))
    return found


@lru_cache(maxsize=None)
def question_rows(dataset_id: str) -> list[QuestionRow]:
    """The manifest's question rows (one per task and raw label), as the build instantiates them."""
    manifest = MANIFESTS[dataset_id]
    made = samples(manifest)
    valid, failures = validate_metadata(normalise_metadata(made, manifest, taxonomy()), taxonomy())
    assert failures.empty, failures.reason.tolist()
    items, dropped = attach_metadata(task_items(made, manifest), valid)
    assert dropped == []
    image = picture(manifest.metadata.modality)
    with Image.open(image) as opened:  # the rows are placed on it, as the build places them on the converted PNG
        placed = on_image(items, image, opened.size)
    rows, dropped = instantiate_questions(placed, manifest, taxonomy(), seed=0)
    assert dropped == [], [e.reason for e in dropped]
    return rows


@lru_cache(maxsize=None)
def content_of(image: str):
    """The content mask of one of the module's pictures (a handful, shared by every dataset's detection rows)."""
    return read_content_mask(image)


@lru_cache(maxsize=None)
def questions(dataset_id: str) -> pd.DataFrame:
    """`question_rows` as the rows step writes them."""
    return rows_frame(question_rows(dataset_id))


@pytest.fixture(scope="module", autouse=True)
def _forget_questions():
    """The cached rows (150 datasets') go with this module, not with the session."""
    yield
    questions.cache_clear()
    question_rows.cache_clear()
    content_of.cache_clear()
    taxonomy.cache_clear()
    _pictures.clear()
    while _folder:
        _folder.pop().cleanup()


@pytest.mark.parametrize("dataset_id", sorted(MANIFESTS))
def test_no_question_of_the_catalogue_fails_the_wording_lint(dataset_id):
    """The build drops every row whose question the lint rejects: a manifest whose options_name or preparation uses
    a forbidden word (an abbreviation, a disease or outcome word) or names one of its labels loses the whole task."""
    failures = lint_questions(question_rows(dataset_id), taxonomy())
    found = failures.drop_duplicates(["task", "template", "category", "word"])
    assert found.empty, "\n".join(f"[{r.task}/{r.template}] {r.category} {r.word!r}: {r.question}"
                                  for r in found.itertuples())


@pytest.mark.parametrize("dataset_id", sorted(MANIFESTS))
def test_open_answer_aliases_stand_for_their_own_label_only(dataset_id):
    """The open-answer pre-check counts a reply equal to an alias as right without the judge. A code of the
    dataset's files ("0" for basophil, "B" for blurred frame) or a wording that also stands for another label of the
    dataset (the taxonomy term Plasmodium lists "Plasmodium vivax" among its synonyms, so the answer "Plasmodium
    vivax" passed for Plasmodium falciparum) would be counted right for the wrong answer."""
    rows = questions(dataset_id)
    rows = rows[rows.task != "object_detection"].drop_duplicates("label")
    wordings = {row.label: {normalise_label_text(w) for w in [row.label, *row.answer_aliases]}
                for row in rows.itertuples()}
    problems = []
    for row in rows.itertuples():
        problems += [f"{row.label!r} accepts the code {a!r}" for a in row.answer_aliases
                     if not re.search(r"[^\W\d_]", a) or re.fullmatch(r"[^\W\d_]", a.strip())]
        for other, forms in wordings.items():
            shared = {normalise_label_text(a) for a in row.answer_aliases} & forms if other != row.label else set()
            problems += [f"{row.label!r} accepts {s!r}, a wording of {other!r}" for s in sorted(shared)]
    assert not problems, problems


def named(text: str, word: str) -> bool:
    """`text` names `word` as a whole word or as its plural."""
    return re.search(rf"(?<!\w){re.escape(word)}(?:s|es)?(?!\w)", text, flags=re.IGNORECASE) is not None


@pytest.mark.parametrize("dataset_id", sorted(MANIFESTS))
def test_no_template_context_names_a_label_of_the_dataset(dataset_id):
    """A classification question's image description (modality, stain, specimen, anatomy, preparation) must not say
    what the options are: chase_db1's anatomy "retinal blood vessels" told the full-context question its answer,
    "retinal blood vessel", through the plural."""
    manifest = MANIFESTS[dataset_id]
    words = {w for raw in manifest.labels for w in (manifest.label_spec(raw).name, *manifest.label_spec(raw).synonyms)}
    rows = questions(dataset_id)
    leaks = {(row.task, w, question) for row in rows[rows.task != "object_detection"].itertuples()
             for question in (row.question_modality, row.question_full_context)
             for w in words if len(w) >= 3 and named(question, w) and not named(row.question_no_context, w)}
    assert not leaks, sorted(leaks)


@pytest.mark.parametrize("dataset_id", sorted(MANIFESTS))
def test_no_open_answer_alias_is_said_by_the_question(dataset_id):
    """cytodark0 asked "Which cell type is most consistent ...?" and accepted "cell" for "brain cell"; endoscapes2023
    asked for a "structure or instrument" and accepted "instrument" for "surgical instrument": the reply repeated
    the question and was counted right without the judge."""
    rows = questions(dataset_id)
    said = {(row.label, alias, question) for row in rows[rows.task != "object_detection"].itertuples()
            for alias in row.answer_aliases
            for question in (row.question_no_context, row.question_modality, row.question_full_context)
            if named(question, alias) if len(alias) >= 3}
    assert not said, sorted(said)


@pytest.mark.parametrize("dataset_id", sorted(MANIFESTS))
def test_full_context_descriptions_read_as_english(dataset_id):
    """The image description the full-context template builds from the metadata: no stain phrase for the absence of
    a stain ("stained with unstained") nor a second one ("of a stained cell culture, stained with Giemsa"), and a
    specimen said once ("of a smear of blood smear blood", "of a section of tissue section colon"); articles are
    the wording rules' (test_the_wording_rules_hold_for_every_template_and_label)."""
    manifest = MANIFESTS[dataset_id]
    specimen = manifest.metadata.specimen.split()[-1]
    problems = set()
    for question in questions(dataset_id).question_full_context:
        if re.search(r"stained with (?:un|non-?)stained", question):
            problems.add(f"stained with no stain: {question}")
        if len(re.findall(r"\bstained\b", question)) > 1:
            problems.add(f"stained twice: {question}")
        description = question[question.rfind(" in this "):]  # after the options_name
        if len(re.findall(rf"\b{re.escape(specimen)}\b", description, flags=re.IGNORECASE)) > 1:
            problems.add(f"specimen {specimen!r} said twice: {question}")
    assert not problems, sorted(problems)


@pytest.mark.parametrize("dataset_id", sorted(MANIFESTS))
def test_the_wording_rules_hold_for_every_template_and_label(dataset_id):
    """What a clinician would not sign (mmbu.build.questions.wording_rules): "of human abdomen", "Locate every fat",
    "this fundus photograph from a human specimen", "structural magnetic resonance image (magnetic resonance
    imaging) of a T1-weighted magnetic resonance slice", "of a laparoscopic video frame", "Which finding ...?" over
    portal vein and gallbladder, the alias "marked_lesion"."""
    problems = wording_problems([row.record() for row in question_rows(dataset_id)], MANIFESTS[dataset_id], taxonomy())
    assert not problems, "\n".join(f"[{p.rule}] {p.detail}: {p.text}" for p in problems)


@pytest.mark.parametrize("dataset_id", sorted(MANIFESTS))
def test_every_closed_detection_row_has_exactly_one_right_answer(dataset_id):
    """Wrong boxes hold no instance of the target, lie on the picture (not in the air around a body, on the black
    frame of an endoscopy or fundus image), have the answer's size and stand apart; the closed question asks for one
    instance ("Which box contains a cell nucleus ...?") while the open one asks for every one."""
    rows = questions(dataset_id)
    detection = rows[rows.task == "object_detection"]
    for row in detection.itertuples():
        content = content_of(row.image)
        problems = box_option_problems(list(row.options), row.answer, row.boxes, (row.image_width, row.image_height),
                                       content)
        assert problems == [], (row.target, problems)
        assert len(row.boxes) == len(INSTANCES) and row.answer in {f"[{', '.join(map(str, b))}]" for b in INSTANCES}
        assert row.closed_question_no_context.startswith("Which box contains ")
    assert detection.empty == ("object_detection" not in MANIFESTS[dataset_id].tasks)


@pytest.mark.parametrize("dataset_id", sorted(MANIFESTS))
def test_no_option_is_a_kind_of_another(dataset_id):
    """A display label that is another one with a modifier in front ("bilobed promyelocyte" and "promyelocyte",
    "cracked tooth" and "tooth") names a kind of it: with the narrower one the answer, the broader one is right too.
    Options also differ after normalisation ("Grade 1" and "grade 1", "HER2+" and "HER2 +")."""
    labels = sorted({MANIFESTS[dataset_id].label_spec(raw).name for raw in MANIFESTS[dataset_id].labels})
    forms = [normalise_label_text(label) for label in labels]
    assert len(set(forms)) == len(forms), labels
    kinds = [(a, b) for i, a in enumerate(labels) for b in labels[i + 1:] if kind_of(a, b)]
    assert not kinds, kinds



def cell_level(anatomy: str | None) -> bool:
    term = taxonomy().resolve("anatomy", anatomy) if anatomy else None
    return term is not None and (term.id == "cell" or term.name.endswith(" cell")
                                 or "cell" in {t.id for t in taxonomy().ancestors("anatomy", term.id)})


@pytest.mark.parametrize("dataset_id", sorted(MANIFESTS))
def test_full_context_descriptions_do_not_call_a_cell_part_the_specimen_region(dataset_id):
    """specimen_subregion is a cell or a part of one for many microscopy sets, and "of {specimen} {anatomy}" then
    read "of cell culture nucleus", "of a tissue section of nucleus", "of human mitochondrion", "of a smear of red
    blood cell"."""
    anatomy = MANIFESTS[dataset_id].metadata.specimen_subregion
    if not cell_level(anatomy):
        return
    name = taxonomy().resolve("anatomy", anatomy).name
    said = {q for q in questions(dataset_id).question_full_context if named(q[q.rfind(" in this "):], name)}
    assert not said, sorted(said)


# classification datasets whose closed question is still "their one label or None of the above" (always the label):
# no distractor has been curated for them yet (usgra_seg's one label is itself two things)
UNCURATED_SINGLE_LABEL = {"usgra_seg"}


@pytest.mark.parametrize("dataset_id", sorted(MANIFESTS))
def test_closed_classification_offers_wrong_options_none_of_which_is_also_right(dataset_id):
    """With one label and no distractors, "X or None of the above" has X for its answer on every row: any model that
    never says none scores 1. The curated `questions.distractors` fill the options; none of them, nor any two
    options, may be the same thing or a kind of another."""
    rows = questions(dataset_id)
    closed = rows[rows.task != "object_detection"]
    if closed.empty:
        return
    none = load_prototypes().none_of_the_above
    for options in closed.options:
        labels = [o for o in options if o != none]
        assert not [(a, b) for i, a in enumerate(labels) for b in labels[i + 1:] if kind_of(a, b)], labels
    single = all(len([o for o in options if o != none]) == 1 for options in closed.options)
    assert single == (dataset_id in UNCURATED_SINGLE_LABEL), closed.options.iloc[0]

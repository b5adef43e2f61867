"""What the real catalogue's manifests make a model read: every label of every manifest, in every task the manifest
asks for, instantiated through the build's own steps (metadata, task items, questions, wording lint) from one
synthetic sample per label. No data is fetched: questions depend only on the manifest and the taxonomy.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import pandas as pd
import pytest
from support.catalogue_replica import DATASETS

from mmbu.benchmark_eval.parser import normalise_label_text
from mmbu.build.layouts.sample import Region, Sample, make_sample_id
from mmbu.build.metadata import normalise_metadata, validate_metadata
from mmbu.build.questions import attach_metadata, instantiate_questions, lint_questions, load_prototypes, task_items
from mmbu.core.wording import kind_of
from mmbu.curation.manifest import find_manifest_files, load_manifest
from mmbu.taxonomy.model import load_taxonomy

MANIFESTS = {m.id: m for m in (load_manifest(p) for p in find_manifest_files([DATASETS]))}
IMAGE_SIZE = (512, 512)


@lru_cache(maxsize=1)
def taxonomy():
    return load_taxonomy()


def samples(manifest) -> list[Sample]:
    """One sample per raw label: that label as the image's label and as one boxed region."""
    found = []
    for index, raw in enumerate(manifest.labels):
        path = f"label_{index}.png"
        found.append(Sample(sample_id=make_sample_id(manifest.id, path), dataset_id=manifest.id, source_path=path,
                            image_path=Path(path), label=raw, image_size=IMAGE_SIZE,
                            regions=(Region(label=raw, instance="1", box=(10, 10, 60, 60), mask_value=1),)))
    return found


@lru_cache(maxsize=None)
def questions(dataset_id: str) -> pd.DataFrame:
    """The manifest's question rows (one per task and raw label), as the build instantiates them."""
    manifest = MANIFESTS[dataset_id]
    made = samples(manifest)
    valid, failures = validate_metadata(normalise_metadata(made, manifest, taxonomy()), taxonomy())
    assert failures.empty, failures.reason.tolist()
    items, dropped = attach_metadata(task_items(made, manifest), valid)
    assert dropped == []
    items = items.assign(image_width=IMAGE_SIZE[0], image_height=IMAGE_SIZE[1])
    rows, dropped = instantiate_questions(items, manifest, taxonomy(), seed=0)
    assert dropped == [], [e.reason for e in dropped]
    return rows


@pytest.fixture(scope="module", autouse=True)
def _forget_questions():
    """The cached rows (150 datasets') go with this module, not with the session."""
    yield
    questions.cache_clear()
    taxonomy.cache_clear()


@pytest.mark.parametrize("dataset_id", sorted(MANIFESTS))
def test_no_question_of_the_catalogue_fails_the_wording_lint(dataset_id):
    """The build drops every row whose question the lint rejects: a manifest whose options_name or preparation uses
    a forbidden word (an abbreviation, a disease or outcome word) or names one of its labels loses the whole task."""
    failures = lint_questions(questions(dataset_id), taxonomy())
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


A_BEFORE_A_VOWEL = re.compile(r"\ba (?!uni|use|usu|ura|ure|uri|uro|uti|eu|one\b)[aeiou]\w*", re.IGNORECASE)
AN_BEFORE_A_CONSONANT = re.compile(r"\ban (?!hour|honest|heir)[b-df-hj-np-tv-z]\w*", re.IGNORECASE)


@pytest.mark.parametrize("dataset_id", sorted(MANIFESTS))
def test_full_context_descriptions_read_as_english(dataset_id):
    """The image description the full-context template builds from the metadata: no wrong article ("an urine
    sediment", "from a environmental sample specimen"), no stain phrase for the absence of a stain ("stained with
    unstained") nor a second one ("of a stained cell culture, stained with Giemsa"), and a specimen said once ("of a
    smear of blood smear blood", "of a section of tissue section colon")."""
    manifest = MANIFESTS[dataset_id]
    specimen = manifest.metadata.specimen.split()[-1]
    problems = set()
    for question in questions(dataset_id).question_full_context:
        problems |= {f"article {m.group(0)!r}: {question}" for m in A_BEFORE_A_VOWEL.finditer(question)}
        problems |= {f"article {m.group(0)!r}: {question}" for m in AN_BEFORE_A_CONSONANT.finditer(question)}
        if re.search(r"stained with (?:un|non-?)stained", question):
            problems.add(f"stained with no stain: {question}")
        if len(re.findall(r"\bstained\b", question)) > 1:
            problems.add(f"stained twice: {question}")
        description = question[question.rfind(" in this "):]  # after the options_name
        if len(re.findall(rf"\b{re.escape(specimen)}\b", description, flags=re.IGNORECASE)) > 1:
            problems.add(f"specimen {specimen!r} said twice: {question}")
    assert not problems, sorted(problems)


PICTURE = re.compile(r"\bof an? [^,?.]*\b(?:image|photograph|micrograph|radiograph|mammogram|B-scan)\b")


@pytest.mark.parametrize("dataset_id", sorted(MANIFESTS))
def test_the_preparation_names_the_specimen_not_the_picture(dataset_id):
    """questions.preparation fills "this <modality> image of <a preparation>": a picture there made an image of an
    image ("this dermoscopy image (optical imaging) of a dermoscopic photograph of human skin", "this B-mode
    ultrasound image (ultrasound imaging) of a breast ultrasound image")."""
    found = set()
    for question in questions(dataset_id).question_full_context:
        description = question[question.rfind(" in this "):]
        if PICTURE.search(description):
            found.add(description)
    assert not found, sorted(found)


# heads of detection targets that cannot follow "every": mass nouns and plurals (the words of the catalogue's targets)
MASS_NOUNS = {"fat", "blood", "bile", "skin", "tissue", "edema", "oedema", "endometriosis", "caries", "mucus", "debris"}


def countable(noun_phrase: str) -> bool:
    """A rough test of a singular countable noun phrase; taxon names (capitalised: "Actinophrys") pass."""
    if noun_phrase[:1].isupper():
        return True
    head = noun_phrase.split(" of ")[0].split()[-1].casefold()  # "instance of fat" is headed by "instance"
    plural = head.endswith("s") and not head.endswith(("ss", "us", "is", "as", "forceps", "caries")) or head == "nuclei"
    return head not in MASS_NOUNS and not plural


@pytest.mark.parametrize("dataset_id", sorted(MANIFESTS))
def test_detection_questions_read_as_english_for_every_target(dataset_id):
    """"Locate every fat", "Locate every seminal vesicles", "Locate every overlapping nuclei", "Locate every
    peritoneal endometriosis": "every" wants one countable thing, and segmentation classes are often a tissue."""
    rows = questions(dataset_id)
    wrong = set()
    for question in rows[rows.task == "object_detection"].question_no_context:
        said = re.match(r"Locate every (.+?) in this image\.$", question)
        assert said, question
        if not countable(said.group(1)):
            wrong.add(question)
    assert not wrong, sorted(wrong)


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

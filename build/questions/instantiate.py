"""Instantiate the three template questions, closed options and answer aliases for task rows."""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from PIL import Image

from mmbu.build.questions.box_options import box_options
from mmbu.build.questions.content import ContentMask, read_content_mask
from mmbu.build.questions.options import label_options, plan_options, rng_for
from mmbu.build.questions.prototypes import load_prototypes
from mmbu.build.questions.rows import PlacedItem, QuestionRow
from mmbu.build.questions.wording_rules import FILE_NAME
from mmbu.core.boxes import box_text
from mmbu.core.exclusions import Exclusion
from mmbu.core.release import Task
from mmbu.core.wording import same_wording
from mmbu.curation.manifest import DatasetManifest
from mmbu.taxonomy.model import Taxonomy

DEFAULT_NONE_ANSWER_RATE = 0.0
MIN_BOX_OPTIONS = 2


def label_set(manifest: DatasetManifest) -> list[str]:
    """The dataset's display labels in manifest order (several raw labels may share one display name)."""
    names: list[str] = []
    for raw in manifest.labels:
        name = manifest.label_spec(raw).name
        if name not in names:
            names.append(name)
    return names


def _wordings(raw: str, manifest: DatasetManifest, taxonomy: Taxonomy) -> list[str]:
    """Every wording of one label that may stand for it: manifest synonyms, the raw label when it is a word (a
    code such as "3" or "B" names a class only inside the dataset's files, and a folder or file name such as
    "marked_lesion" is no answer anyone writes), then the canonical name and
    abbreviations of a taxonomy term whose canonical name the label is. A label that only matches a term through
    one of its synonyms may be narrower than the term, whose other names are then its parents or siblings
    ("Plasmodium falciparum" is a synonym of the term Plasmodium, as is "Plasmodium vivax"; "artery" one of blood
    vessel, as is "vein"), so such a term adds nothing."""
    spec = manifest.label_spec(raw)
    found = [*spec.synonyms]
    if raw != spec.name and re.search(r"[^\W\d_]", raw) and not re.fullmatch(r"[^\W\d_]", raw.strip()) \
            and not FILE_NAME.search(raw):
        found.append(raw)
    for facet in taxonomy.facets:
        term = taxonomy.resolve(facet, spec.name)
        if term is not None and same_wording(term.name) == same_wording(spec.name):
            # its canonical name and abbreviations, not its synonyms: those map source values onto the term for the
            # metadata and hold broader and narrower names ("bile ducts", "biliary tree" for gallbladder), which the
            # judge would call NOT_EQUIVALENT and the pre-check must not accept without it
            found.extend([term.name, *term.abbreviations])
    return found


def answer_aliases(raw: str, manifest: DatasetManifest, taxonomy: Taxonomy) -> list[str]:
    """Other accepted wordings of a label for the open-answer pre-check, which counts an answer equal to one of them
    as right without asking the judge: `_wordings` of the label, less any wording that another display label of the
    dataset has (its name, or one of its own wordings), since such an answer would not tell the two apart."""
    name = manifest.label_spec(raw).name
    others: set[str] = set()
    for other in manifest.labels:
        other_name = manifest.label_spec(other).name
        if other_name != name:
            others |= {same_wording(w) for w in (other_name, *_wordings(other, manifest, taxonomy))}
    aliases: list[str] = []
    seen = {name.casefold()}
    for alias in _wordings(raw, manifest, taxonomy):
        if alias.casefold() not in seen and same_wording(alias) not in others:
            seen.add(alias.casefold())
            aliases.append(alias)
    return aliases


CONTEXT_VALUES = ("modality", "sub_modality", "stain", "specimen", "anatomy", "preparation")


def label_words(manifest: DatasetManifest) -> list[str]:
    """Every wording of the dataset's labels (display names, raw keys, synonyms), for leak checks."""
    words = {str(raw) for raw in manifest.labels}
    for raw in manifest.labels:
        spec = manifest.label_spec(raw)
        words |= {spec.name, *spec.synonyms}
    return sorted(w for w in words if len(w) >= 3)


def mentions_any(text: str, words: list[str]) -> str | None:
    """The first of `words` that `text` contains as a whole word, or as its plural (case-insensitive), else None:
    "retinal blood vessels" names the label "retinal blood vessel" (a plural of a word of one or two characters,
    "I" in "is", is not one)."""
    for word in words:
        plural = "(?:s|es)?" if len(word) >= 3 else ""
        if re.search(rf"(?<!\w){re.escape(word)}{plural}(?!\w)", text, flags=re.IGNORECASE):
            return word
    return None


ROW_VALUES = ("modality", "sub_modality", "stain", "specimen", "specimen_subregion")  # the columns questions use


CELL = "cell"  # the anatomy term under which the taxonomy keeps cells and cellular compartments


def cellular(taxonomy: Taxonomy, anatomy: str | None) -> bool:
    """Whether an anatomy value is a cell or a part of one (nucleus, mitochondrion, sperm head; blood cells, which
    the taxonomy keeps under blood): a region an image shows, not a place it is "of"."""
    term = taxonomy.resolve("anatomy", anatomy) if anatomy and "anatomy" in taxonomy.facets else None
    if term is None:
        return False
    return term.id == CELL or any(t.id == CELL for t in taxonomy.ancestors("anatomy", term.id)) or \
        term.name.split()[-1].casefold() == CELL


def _values(row: Mapping[str, str | None], manifest: DatasetManifest, target: str | None,
            leaking: list[str], taxonomy: Taxonomy) -> dict[str, str | None]:
    """Placeholder values of one row (its `ROW_VALUES`). For classification, a context value that
    names one of the dataset's labels is withheld (e.g. anatomy "abdomen" when the labels are body regions),
    so the full-context question never gives the answer away. A cellular anatomy is withheld from every task: the
    description says what the image is of ("of human brain"), and "of a tissue section of nucleus" or "of cell
    culture nucleus" says nothing right."""
    modality, sub_modality, stain, specimen, anatomy = (row[name] for name in ROW_VALUES)
    if cellular(taxonomy, anatomy):
        anatomy = None
    values = {"modality": modality, "sub_modality": sub_modality, "stain": stain, "specimen": specimen,
              "anatomy": anatomy, "preparation": manifest.questions.preparation,
              "options_name": manifest.questions.options_name, "target": target}
    for name in CONTEXT_VALUES:
        if leaking and values[name] and mentions_any(values[name], leaking):
            values[name] = None
    if manifest.sub_modality_varies():  # it tells the classes apart: naming it on some rows would answer them
        values["sub_modality"] = None
    return values


def instantiate_questions(rows: Iterable[PlacedItem], manifest: DatasetManifest, taxonomy: Taxonomy, seed: int, *,
                          none_answer_rate: float = DEFAULT_NONE_ANSWER_RATE,
                          prototypes_path: str | Path | None = None) -> tuple[list[QuestionRow], list[Exclusion]]:
    """Questions, options and answers for one dataset's placed items (with their metadata attached).

    A detection item's wrong boxes are placed on its PNG's content (`box_options`). `none_answer_rate` is the share
    of closed classification rows whose gold label is deliberately left out so that "None of the above" is the
    answer (0 by default: the open and closed forms share a row, and the `label` column then keeps the true class).
    Returns the question rows, and the items that could not be asked about.
    """
    prototypes = load_prototypes(prototypes_path)
    labels = label_set(manifest)
    words = label_words(manifest)
    hints = manifest.questions
    distractors = [d for d in dict.fromkeys(hints.distractors) if d not in labels]
    classify_plan = plan_options(len(labels) + len(distractors), hints.n_options, hints.none_of_the_above)
    # detection always offers at least two boxes: with one, the closed question would answer itself
    box_slots = max(MIN_BOX_OPTIONS, hints.n_options - int(hints.none_of_the_above))
    box_plan = plan_options(box_slots, box_slots + int(hints.none_of_the_above), hints.none_of_the_above)
    out: list[QuestionRow] = []
    exclusions: list[Exclusion] = []
    # a dataset's rows share a few metadata combinations: each one's questions and each label's aliases are
    # made once (rendering and the leak checks were a third of the step, per row)
    questions: dict[tuple[object, ...], dict[str, str | None]] = {}
    contents: dict[str, ContentMask] = {}  # the last image's: a sample's rows are consecutive
    label_aliases: dict[str, list[str]] = {}
    aliases: dict[tuple[object, ...], list[str]] = {}

    for placed in rows:
        item = placed.item

        def drop(reason: str) -> None:
            exclusions.append(Exclusion(dataset_id=manifest.id, sample_id=item.sample_id, item=item.source_path,
                                        stage="questions", reason=reason))

        rng = rng_for(item.sample_id, seed)
        raw = item.label
        spec = manifest.label_spec(raw)
        if spec is None:
            drop(f"label {raw!r} is not in the manifest's label vocabulary")
            continue
        detection = item.task == Task.DETECTION
        target = spec.name if detection else None
        leaking = [] if detection else words
        context = {name: item.metadata_value(name) for name in ROW_VALUES}
        key = (item.task, target, *context.values())
        if key not in questions:
            questions[key] = prototypes.render(item.task, _values(context, manifest, target, leaking, taxonomy))
        if detection:
            image = str(placed.image)
            try:
                if image not in contents:
                    contents = {image: read_content_mask(image)}
            except (OSError, ValueError, Image.DecompressionBombError) as exc:
                drop(f"the image {image} cannot be read to place wrong boxes on its content ({exc})")
                continue
            made = box_options([tuple(b) for b in placed.boxes], [tuple(b) for b in placed.other_boxes or ()],
                               placed.image_size, box_plan.label_slots, contents[image], rng)
            if made is None:
                drop(f"no room on the image's content for {box_plan.label_slots - 1} wrong box(es) of the "
                     f"answer's size clear of every {target} and of each other")
                continue
            boxes, answer = made
            options = [box_text(b) for b in boxes] + ([prototypes.none_of_the_above] if box_plan.none_of_the_above else [])
            rng.shuffle(options)
            out.append(QuestionRow(placed, spec.name, target, questions[key], options, box_text(answer), [],
                                   prototypes.version))
            continue
        if classify_plan is None:
            drop(f"the dataset has {len(labels)} label(s): too few for a closed question")
            continue
        leave_out = (none_answer_rate > 0 and classify_plan.none_of_the_above
                     and len(labels) - 1 + len(distractors) >= classify_plan.label_slots
                     and rng_for(item.sample_id, seed, "none-answer").random() < none_answer_rate)
        options, answer = label_options(spec.name, labels, classify_plan, rng, prototypes.none_of_the_above,
                                        leave_out, distractors)
        if raw not in label_aliases:
            label_aliases[raw] = answer_aliases(raw, manifest, taxonomy)
        if (raw, key) not in aliases:
            # an alias the question itself says ("cell" for "brain cell" asked as "Which cell type ...?") is
            # an answer taken from the question, not from the image
            said = [question for question in questions[key].values() if question]
            aliases[raw, key] = [alias for alias in label_aliases[raw]
                                 if not any(mentions_any(question, [alias]) for question in said)]
        out.append(QuestionRow(placed, spec.name, None, questions[key], options, answer, list(aliases[raw, key]),
                               prototypes.version))
    return out, exclusions

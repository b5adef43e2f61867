"""Licence normalisation, label provenance, image evidence, the contamination list, dedupe and scoring."""
import pytest

from mmbu.curation.agent.contamination import ExclusionList
from mmbu.curation.agent.dedupe import dedupe
from mmbu.curation.agent.licenses import normalise_license
from mmbu.curation.agent.scoring import score
from mmbu.curation.agent.screening import screen
from mmbu.curation.agent.settings import load_settings
from mmbu.curation.sources.candidate import Candidate
from mmbu.taxonomy.model import load_taxonomy


def make(source="zenodo", id="1", title="Chest radiograph masks", **fields):
    return Candidate(source=source, id=id, title=title, url=fields.pop("url", f"https://example.org/{source}/{id}"), **fields)


@pytest.mark.parametrize("raw, source, spdx", [
    (["cc-zero"], "zenodo", "CC0-1.0"), (["cc-by"], "zenodo", "CC-BY-1.0"), (["cc-nc"], "zenodo", "CC-BY-NC-2.0"),
    (["cc-by-4.0"], "zenodo", "CC-BY-4.0"), (["CC0: Public Domain"], "kaggle", "CC0-1.0"),
    (["Attribution 4.0 International (CC BY 4.0)"], "kaggle", "CC-BY-4.0"), (["CC BY-SA 4.0"], "kaggle", "CC-BY-SA-4.0"),
    (["apache-2.0"], "huggingface", "Apache-2.0"), (["odbl"], "huggingface", "ODbL-1.0"),
    (["Unknown"], "kaggle", None), (["Other (specified in description)"], "kaggle", None), ([], "zenodo", None),
    (["other"], "huggingface", None), (["made-up-licence"], "huggingface", None),
])
def test_licences_to_spdx(raw, source, spdx):
    assert normalise_license(raw, source).spdx == spdx


def test_card_and_tag_disagreeing_is_a_conflict_and_the_card_wins():
    verdict = normalise_license(["other", "cc-by-4.0"], "huggingface")
    assert verdict.spdx is None and verdict.conflict and "CC-BY-4.0" in verdict.reason


def screened(candidate):
    return screen(candidate, load_settings(), ExclusionList.load())


def test_screen_flags_and_exclusions():
    clean = screened(make(license_raw=["cc-zero"], description="Chest X-ray images with masks."))
    assert (clean.license, clean.flags, clean.excluded) == ("CC0-1.0", [], False)

    unclear = screened(make(license_raw=["Unknown"], source="kaggle", description="radiograph images"))
    assert unclear.flags == ["unclear-license"] and not unclear.excluded  # a reviewer may find the licence

    machine = screened(make(source="huggingface", annotations_creators=["machine-generated"], license_raw=["mit"],
                            description="images"))
    assert "machine-labels" in machine.flags and machine.excluded

    tabular = screened(make(title="Hospital billing", keywords=["tabular", "finance"], license_raw=["mit"]))
    assert tabular.flags == ["not-imaging"] and tabular.excluded


@pytest.mark.parametrize("fields, how", [
    ({"title": "PathVQA images re-release"}, "title names PathVQA"),
    ({"source": "huggingface", "id": "flaviagiammarino/path-vqa", "title": "x"}, "listed id"),
    ({"title": "Radiology questions", "keywords": ["vqa_rad"]}, "keywords names VQA-RAD"),
    ({"title": "Chest QA", "source_datasets": ["mimic-cxr"], "description": "instruction tuning pairs"},
     "derives from MIMIC-CXR"),
    ({"title": "Pathology crops", "description": "Tiles curated from the Quilt-1M video frames."},
     "description says it derives from Quilt-1M"),
    ({"title": "x", "doi": "10.17605/OSF.IO/89KPS"}, "listed id doi:10.17605/osf.io/89kps"),
])
def test_contamination_list_matches_ids_names_and_derivations(fields, how):
    candidate = screened(make(**fields))
    assert candidate.excluded and "contaminated" in candidate.flags
    assert any(how in reason for reason in candidate.reasons), candidate.reasons


@pytest.mark.parametrize("fields", [
    {"title": "Slaked lime microscopy images"},  # SLAKE is a whole word only
    {"title": "MIMIC-CXR label subset", "description": "frontal images with findings labels"},  # parent without VQA wording
    {"title": "Chest radiographs", "description": "Unlike VQA-RAD, our labels are per-pixel masks."},  # mention, no derivation
])
def test_contamination_list_does_not_overreach(fields):
    assert "contaminated" not in screened(make(**fields)).flags


def test_dedupe_merges_by_doi_url_and_title_keeping_the_most_authoritative_host():
    zenodo = make(id="7", title="Blood smear microscopy images", doi="10.5281/zenodo.7", queries=["q1"])
    kaggle = make(source="kaggle", id="u/blood", title="Blood Smear Microscopy Images!", queries=["q2"])
    hub = make(source="huggingface", id="o/b", title="other", doi="10.5281/ZENODO.7", keywords=["medical"])
    alone = make(source="kaggle", id="u/other", title="Something else entirely")
    namesake = make(source="kaggle", id="v/other", title="Something else, entirely")  # same host: not merged
    merged = dedupe([kaggle, hub, zenodo, alone, namesake])
    assert [c.ref for c in merged] == ["zenodo:7", "kaggle:u/other", "kaggle:v/other"]
    kept = merged[0]
    assert {r.ref for r in kept.also_found_in} == {"kaggle:u/blood", "huggingface:o/b"}
    assert kept.queries == ["q1", "q2"] and kept.keywords == ["medical"]


def test_score_counts_taxonomy_terms_and_the_gap_bonus(taxonomy_path):
    taxonomy = load_taxonomy(taxonomy_path)
    weights = load_settings().score_weights
    on_topic = make(title="Chest radiograph segmentation", description="CXR of the chest in radiology")
    off_topic = make(title="Kitchen photos")
    assert score(on_topic, taxonomy, weights, {"chest_radiograph"}) > score(off_topic, taxonomy, weights) == 0
    assert on_topic.matched_terms["sub_modality"] == ["chest_radiograph"]
    assert on_topic.matched_terms["domain"] == ["radiology"]


def image_record(files, sizes=None, kind="image-photo", **fields):
    fields.setdefault("description", "Chest radiographs, boxes drawn by radiologists.")
    return screened(make(id=fields.pop("id", "9"), license_raw=["cc-by-4.0"], resource_type=kind, file_names=files,
                         file_sizes=sizes or {}, **fields))


def test_an_image_record_with_one_png_is_screened_out_with_its_reason():
    figure = image_record(["figure1.png"], {"figure1.png": 48_000}, kind="image-figure")
    assert figure.excluded and figure.flags == ["too-few-images"]
    assert figure.reasons == ["too-few-images: a Zenodo image-figure record listing 1 file(s), 1 image file "
                              "(figure1.png): too few images to be a dataset (that takes 20 image files or an archive "
                              "of at least 1 MiB)"]


@pytest.mark.parametrize("files, sizes", [
    (["images.zip"], {"images.zip": 734_003_200}),  # an archive of a useful size
    (["images.zip"], {}),  # an archive whose size the host does not state
    ([f"slide_{i:02d}.tiff" for i in range(40)], {}),  # 40 TIFFs
    (["stack.h5", "README.md"], {"stack.h5": 5_000_000}),  # an array container
])
def test_an_image_record_with_many_images_or_an_archive_goes_on_to_review(files, sizes):
    kept = image_record(files, sizes)
    assert not kept.excluded and kept.flags == [], kept.reasons


def test_an_image_resource_type_is_image_evidence_in_itself():
    microscope = image_record([f"cell_{i:02d}.czi" for i in range(25)], description="Raw confocal acquisitions.")
    assert not microscope.excluded and microscope.flags == []  # .czi is no generic image extension
    plain = screened(make(license_raw=["cc-by-4.0"], title="Raw acquisitions", file_names=["cell_01.czi"]))
    assert plain.flags == ["no-image-evidence"]


def test_a_tiny_archive_and_a_few_photos_are_not_a_dataset():
    few = image_record(["a.jpg", "b.jpg", "c.jpg", "d.jpg", "thumbs.zip"], {"thumbs.zip": 40_960})
    assert few.excluded and few.flags == ["too-few-images"]
    assert "4 image files (a.jpg, b.jpg, c.jpg, ...)" in few.reasons[0] and "thumbs.zip is only 40 KiB" in few.reasons[0]
    restricted = image_record([])  # restricted or metadata-only: nothing to count
    assert restricted.excluded and "listing 0 file(s), 0 image files" in restricted.reasons[0]


def test_a_description_that_counts_enough_images_keeps_a_few_file_record_for_a_reviewer():
    stack = image_record(["stack.tif"], description="A stack of 1,500 confocal frames of a blood smear.")
    assert not stack.excluded and stack.flags == ["image-count-unverified"]
    assert "speaks of 1500 images" in stack.reasons[0]
    caption = image_record(["fig.png"], description="Panel 3 of 12 images in figure 4.")  # 12 < 20: still a figure
    assert caption.excluded and caption.flags == ["too-few-images"]


@pytest.mark.parametrize("fields", [
    {"resource_type": "dataset"},  # the dataset pass: judged by the other checks only
    {"resource_type": None},  # older candidate files, other hosts
    {"source": "huggingface", "resource_type": "image"},  # the image rule is about Zenodo's resource types
])
def test_the_image_record_rule_leaves_other_records_alone(fields):
    candidate = screened(make(license_raw=["cc-by-4.0"], file_names=["figure1.png"], **fields))
    assert "too-few-images" not in candidate.flags and not candidate.excluded

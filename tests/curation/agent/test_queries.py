"""Gaps, deterministic queries, widening and the per-source dialects."""
from collections import Counter

import pytest
import yaml

from mmbu.curation.agent.dialects import source_requests, to_huggingface, to_kaggle, to_paperswithcode, to_zenodo
from mmbu.curation.agent.settings import SettingsError, ZenodoPass, load_settings
from mmbu.curation.data import DISCOVERY_PATH
from mmbu.curation.agent.gaps import count_accepted, find_gaps
from mmbu.curation.agent.queries import MODALITY_ONLY, NO_SPECIMEN, build_queries, widen
from mmbu.taxonomy.model import load_taxonomy


def test_gaps_are_leaves_under_target_emptiest_first(taxonomy_path):
    taxonomy = load_taxonomy(taxonomy_path)
    gaps = find_gaps(taxonomy, Counter({"chest_radiograph": 3, "dermoscopy": 1}), target=3)
    assert [(g.key, g.accepted, g.missing) for g in gaps] == [("brightfield_microscopy", 0, 3), ("dermoscopy", 1, 2)]


def test_accepted_counts_come_from_manifests_and_bad_ones_are_named(taxonomy_path, tmp_path):
    taxonomy = load_taxonomy(taxonomy_path)
    (tmp_path / "broken.yaml").write_text("id: [unclosed\n")
    counts, problems = count_accepted(tmp_path, taxonomy)
    assert counts == Counter() and "broken.yaml" in problems[0]


def test_queries_are_deterministic_and_round_robin_over_gaps(taxonomy_path):
    taxonomy = load_taxonomy(taxonomy_path)
    gaps = find_gaps(taxonomy, Counter(), target=1)
    first = build_queries(taxonomy, gaps, ["segmentation", "classification"], extra_synonyms={"dermoscopy": ["dermatoscope images"]})
    again = build_queries(taxonomy, gaps, ["segmentation", "classification"], extra_synonyms={"dermoscopy": ["dermatoscope images"]})
    assert first == again
    assert [q.gap for q in first[:3]] == ["chest_radiograph", "brightfield_microscopy", "dermoscopy"]
    assert first[0].text == '"chest radiograph" human segmentation'
    phrases = {q.phrase for q in first if q.gap == "chest_radiograph"}
    assert phrases == {"chest radiograph", "chest x-ray", "CXR"}  # name, synonym, abbreviation
    assert "dermatoscope images" in {q.phrase for q in first if q.gap == "dermoscopy"}
    assert len(first) == 3 * 2 + 2 * 2 + 3 * 2


def test_widening_drops_specimen_then_sub_modality(taxonomy_path):
    taxonomy = load_taxonomy(taxonomy_path)
    query = build_queries(taxonomy, find_gaps(taxonomy, Counter(), 1), ["segmentation"])[0]
    step1 = widen(query)
    step2 = widen(step1)
    assert (step1.specimen, step1.level, step1.phrase) == (None, NO_SPECIMEN, "chest radiograph")
    assert (step2.phrase, step2.level) == ("radiography", MODALITY_ONLY)
    assert widen(step2) is None


def test_dialects(taxonomy_path):
    taxonomy = load_taxonomy(taxonomy_path)
    query = build_queries(taxonomy, find_gaps(taxonomy, Counter(), 1), ["segmentation"])[0]
    zenodo = to_zenodo(query)
    assert zenodo["type"] == "dataset"
    assert zenodo["q"].startswith('(title:"chest radiograph" OR keywords:"chest radiograph" OR description:"chest radiograph")'
                                  ' AND "human" AND segmentation AND NOT (keywords:vqa')
    assert to_huggingface(query) == {"search": "chest radiograph", "filter": ["modality:image"]}
    assert to_kaggle(query) == {"search": "chest radiograph human"}
    assert to_paperswithcode(query) == ["chest radiograph", "human"]


def test_zenodo_sends_one_request_per_resource_type_pass_of_the_settings(taxonomy_path):
    taxonomy = load_taxonomy(taxonomy_path)
    query = build_queries(taxonomy, find_gaps(taxonomy, Counter(), 1), ["segmentation"])[0]
    settings = load_settings()
    requests = source_requests("zenodo", query, settings)
    assert [(channel, compiled["type"]) for channel, compiled, _ in requests] == [
        ("zenodo (type=dataset)", "dataset"), ("zenodo (type=image)", "image")]
    assert requests[0][1] == to_zenodo(query)  # the dataset pass as before: older runs' cached answers still replay
    assert requests[1][1]["q"] == requests[0][1]["q"]
    assert set(requests[1][1]) == {"q", "type", "sort"}  # no subtype: type=image alone finds every image sub-type

    photos = settings.model_copy(update={"zenodo": settings.zenodo.model_copy(
        update={"passes": [ZenodoPass(type="image", subtype="photo")]})})
    [(channel, compiled, pages)] = source_requests("zenodo", query, photos)
    assert channel == "zenodo (type=image-photo)" and (compiled["type"], compiled["subtype"]) == ("image", "photo")
    assert pages == settings.max_pages_per_query
    assert source_requests("kaggle", query, settings) == [("kaggle", to_kaggle(query), settings.max_pages_per_query)]


def test_a_zenodo_pass_can_read_fewer_pages_than_the_other_sources(taxonomy_path):
    taxonomy = load_taxonomy(taxonomy_path)
    query = build_queries(taxonomy, find_gaps(taxonomy, Counter(), 1), ["segmentation"])[0]
    settings = load_settings()
    capped = settings.model_copy(update={"max_pages_per_query": 3, "zenodo": settings.zenodo.model_copy(
        update={"passes": [ZenodoPass(type="dataset"), ZenodoPass(type="image", max_pages=1)]})})
    assert [r.max_pages for r in source_requests("zenodo", query, capped)] == [3, 1]
    with pytest.raises(ValueError):
        ZenodoPass(type="image", max_pages=0)


def test_passes_are_data_and_a_bad_one_is_named(tmp_path):
    document = yaml.safe_load(DISCOVERY_PATH.read_text())
    assert [p["type"] for p in document["zenodo"]["passes"]] == ["dataset", "image"]
    document["zenodo"]["passes"].append({"type": "Image Photo"})
    bad = tmp_path / "discovery.yaml"
    bad.write_text(yaml.safe_dump(document))
    with pytest.raises(SettingsError, match=r"discovery.yaml: field zenodo\.passes\.2\.type: String should match"):
        load_settings(bad)

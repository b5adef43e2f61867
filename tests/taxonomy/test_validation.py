"""Structural validation of taxonomies: every defect is found, named and reported at once."""
from __future__ import annotations

from pathlib import Path

import yaml

from mmbu.taxonomy import load_taxonomy
from mmbu.taxonomy.validation import Problem, validate_taxonomy


def write_taxonomy(tmp_path: Path, facets: dict) -> Path:
    """Write a small taxonomy file with the real YAML writer (facets given as plain dicts)."""
    path = tmp_path / "taxonomy.yaml"
    path.write_text(yaml.safe_dump({"schema_version": 1, "facets": facets}, sort_keys=False), encoding="utf-8")
    return path


def modality_facet(*extra_terms: dict) -> dict:
    terms = [
        {"id": "light_microscopy", "name": "light microscopy", "abbreviations": ["LM"]},
        {"id": "computed_tomography", "name": "computed tomography", "abbreviations": ["CT"]},
        *extra_terms,
    ]
    return {"description": "modalities", "terms": terms}


def problems_for(tmp_path: Path, facets: dict) -> list[Problem]:
    return validate_taxonomy(load_taxonomy(write_taxonomy(tmp_path, facets)))


def causes(problems: list[Problem]) -> list[tuple[str, str | None, str]]:
    return [(p.facet, p.term, p.cause) for p in problems]


def test_a_clean_small_taxonomy_has_no_problems(tmp_path):
    facets = {
        "modality": modality_facet(),
        "sub_modality": {
            "description": "sub",
            "parent_facet": "modality",
            "terms": [{"id": "brightfield", "name": "brightfield microscopy", "parent": "light_microscopy"}],
        },
    }
    assert problems_for(tmp_path, facets) == []


def test_duplicate_ids_and_names_are_found(tmp_path):
    facets = {"modality": modality_facet(
        {"id": "light_microscopy", "name": "optical microscopy"},
        {"id": "ct_again", "name": "Computed Tomography"},
    )}
    found = causes(problems_for(tmp_path, facets))
    assert ("modality", "light_microscopy", "duplicate id (another term of this facet has it)") in found
    assert any(term == "ct_again" and "duplicate name 'Computed Tomography'" in cause and "computed_tomography" in cause
               for _, term, cause in found)


def test_dangling_parent_in_same_facet_and_in_parent_facet(tmp_path):
    facets = {
        "modality": modality_facet(),
        "sub_modality": {
            "description": "sub",
            "parent_facet": "modality",
            "terms": [
                {"id": "phase_contrast", "name": "phase contrast microscopy", "parent": "phase_microscopy"},
                {"id": "orphan", "name": "orphan technique"},
            ],
        },
        "anatomy": {
            "description": "tree",
            "terms": [{"id": "liver", "name": "liver", "parent": "abdomen"}],
        },
    }
    found = causes(problems_for(tmp_path, facets))
    assert ("sub_modality", "phase_contrast", "parent 'phase_microscopy' is not a term of facet 'modality'") in found
    assert ("anatomy", "liver", "parent 'abdomen' is not a term of facet 'anatomy'") in found
    assert any(term == "orphan" and "has no parent" in cause for _, term, cause in found)


def test_parent_facet_that_does_not_exist(tmp_path):
    facets = {"sub_modality": {"description": "sub", "parent_facet": "modalities", "terms": [
        {"id": "tem", "name": "transmission electron microscopy", "parent": "electron_microscopy"}]}}
    assert causes(problems_for(tmp_path, facets)) == [
        ("sub_modality", None, "parent_facet 'modalities' is not a facet of this taxonomy")]


def test_parent_cycles_are_found_once_each(tmp_path):
    facets = {"anatomy": {"description": "tree", "terms": [
        {"id": "thorax", "name": "thorax"},
        {"id": "heart", "name": "heart", "parent": "ventricle"},
        {"id": "ventricle", "name": "ventricle", "parent": "heart"},
        {"id": "cell", "name": "cell", "parent": "cell"},
    ]}}
    found = causes(problems_for(tmp_path, facets))
    assert found == [
        ("anatomy", "heart", "parent cycle heart -> ventricle -> heart"),
        ("anatomy", "cell", "parent cycle cell -> cell"),
    ]


def test_synonym_and_abbreviation_clashes_name_both_terms(tmp_path):
    facets = {"stain": {"description": "stains", "terms": [
        {"id": "hematoxylin_and_eosin", "name": "hematoxylin and eosin", "synonyms": ["H and E"], "abbreviations": ["H&E"]},
        {"id": "hematoxylin", "name": "hematoxylin", "synonyms": ["h-and-e"]},
        {"id": "eosin", "name": "eosin", "abbreviations": ["h&e"]},
        {"id": "giemsa", "name": "Giemsa", "synonyms": ["Eosin"]},
    ]}}
    found = causes(problems_for(tmp_path, facets))
    assert ("stain", "hematoxylin", "synonym 'h-and-e' also resolves to term 'hematoxylin_and_eosin' (its synonym)") in found
    assert ("stain", "eosin", "abbreviation 'h&e' also resolves to term 'hematoxylin_and_eosin' (its abbreviation)") in found
    assert ("stain", "giemsa", "synonym 'Eosin' also resolves to term 'eosin' (its id)") in found


def test_the_same_text_in_two_facets_is_not_a_clash(tmp_path):
    facets = {
        "modality": modality_facet({"id": "clinical_photography", "name": "clinical photography"}),
        "sub_modality": {"description": "s", "parent_facet": "modality", "terms": [
            {"id": "clinical_photography", "name": "clinical photography", "parent": "clinical_photography"}]},
    }
    assert problems_for(tmp_path, facets) == []


def test_names_must_not_contain_an_abbreviation(tmp_path):
    facets = {"modality": modality_facet({"id": "ct_angiography", "name": "CT angiography"})}
    found = causes(problems_for(tmp_path, facets))
    assert ("modality", "ct_angiography", "name 'CT angiography' contains the abbreviation(s) CT") in found


def test_every_problem_is_reported_in_one_pass(tmp_path):
    facets = {
        "modality": modality_facet({"id": "light_microscopy", "name": "light microscopy again"}),
        "anatomy": {"description": "tree", "terms": [
            {"id": "a", "name": "a", "parent": "b"},
            {"id": "b", "name": "b", "parent": "a"},
            {"id": "c", "name": "c", "parent": "nowhere"},
            {"id": "d", "name": "d", "synonyms": ["c"]},
        ]},
    }
    found = problems_for(tmp_path, facets)
    assert len(found) == 4
    assert [str(p).split(":")[0] for p in found] == [
        "facet 'modality', term 'light_microscopy'",
        "facet 'anatomy', term 'c'",
        "facet 'anatomy', term 'a'",
        "facet 'anatomy', term 'd'",
    ]

"""The bundled expert taxonomy validates, reaches the paper's breadth and maps the authors' raw values."""
from __future__ import annotations

import re

import pytest

from mmbu.taxonomy import load_taxonomy
from mmbu.taxonomy.validation import validate_taxonomy

TAXONOMY = load_taxonomy()

# The authors' lowercase metadata_modality values (reference notes §3).
AUTHOR_MODALITIES = [
    "computed tomography", "digital pathology", "electron microscopy", "endoscopy", "fluorescence microscopy",
    "light microscopy", "magnetic resonance imaging", "optical imaging", "ultrasound imaging", "x-ray imaging",
    "clinical photography",
]
AUTHOR_DOMAINS = [
    "Oncology", "Surgery", "Pathology", "Pulmonology", "Ophthalmology", "Biology", "Dermatology", "Radiology",
    "Gastroenterology", "Orthopedics", "Hematology", "Infectious disease", "Neurology", "Urology",
    "Obstetrics and gynecology", "Cardiology", "Rheumatology", "Nephrology", "Hepatology",
]
# metadata_modality -> metadata_submodality pairs printed from the authors' TSV, spelled as they wrote them.
# (Their "Brightfield Microscopy" under digital pathology / fluorescence microscopy is left out: in this
# taxonomy brightfield microscopy is a light-microscopy technique and slides scanned for pathology are
# whole-slide brightfield imaging.)
AUTHOR_PAIRS = [
    ("computed tomography", "Conventional CT"), ("computed tomography", "Spiral CT"),
    ("electron microscopy", "Serial Blockface SEM"), ("electron microscopy", "cryo-electron tomography"),
    ("electron microscopy", "serial blockface scanning electron microscopy"),
    ("endoscopy", "Confocal Laser Endomicroscopy"), ("endoscopy", "Laparoscopy"), ("endoscopy", "White-light Endoscopy"),
    ("fluorescence microscopy", "Epifluorescence Microscopy"), ("fluorescence microscopy", "Simulated Fluorescence Microscopy"),
    ("fluorescence microscopy", "confocal microscopy"), ("fluorescence microscopy", "synthetic"),
    ("fluorescence microscopy", "total internal reflection fluorescence microscopy (TIRF)"),
    ("light microscopy", "Brightfield Microscopy"), ("light microscopy", "Differential Interference Contrast Microscopy"),
    ("light microscopy", "Phase Contrast Microscopy"), ("light microscopy", "darkfield microscopy"),
    ("magnetic resonance imaging", "Structural MRI"),
    ("optical imaging", "Corneal Confocal Microscopy "), ("optical imaging", "Dermoscopy"),
    ("optical imaging", "Fundus Photography"), ("optical imaging", "Optical Coherence Tomography"),
    ("optical imaging", "Optical Coherence Tomography Angiography"),
    ("ultrasound imaging", "B-Mode Ultrasound"), ("ultrasound imaging", "Color Doppler"),
    ("x-ray imaging", "Digital Radiography"), ("x-ray imaging", "Fluoroscopy"),
]


def test_bundled_taxonomy_is_valid():
    assert validate_taxonomy(TAXONOMY) == []


def test_modalities_are_exactly_the_authors_eleven():
    assert sorted(TAXONOMY.names("modality")) == sorted(AUTHOR_MODALITIES)


def test_breadth_meets_the_paper():
    assert len(TAXONOMY.terms("sub_modality")) >= 35
    assert len(TAXONOMY.terms("domain")) >= 27
    assert len(TAXONOMY.terms("specimen")) >= 20
    assert len(TAXONOMY.terms("anatomy")) >= 95
    assert len(TAXONOMY.terms("stain")) >= 20


@pytest.mark.parametrize("facet, raw", [
    *[("sub_modality", s) for s in (
        "phase contrast", "DIC", "darkfield", "epifluorescence", "confocal", "TIRF", "light-sheet microscopy", "TEM",
        "SEM", "SBF-SEM", "cryo-ET", "digital radiography", "fluoroscopy", "mammography", "helical CT",
        "structural MRI", "diffusion MRI", "B-mode", "Doppler ultrasound", "white-light endoscopy", "laparoscopy",
        "confocal laser endomicroscopy", "capsule endoscopy", "colposcopy", "dermoscopy", "clinical photography",
        "fundus photography", "OCT", "OCTA", "near-infrared imaging", "specular microscopy",
        "corneal confocal microscopy", "adaptive optics ophthalmoscopy", "WSI")],
    *[("domain", d) for d in (*AUTHOR_DOMAINS, "cell biology", "microbiology", "parasitology", "neuroscience",
                               "developmental biology", "immunology", "plant biology")],
    *[("specimen", s) for s in (
        "human", "mouse", "rat", "zebrafish", "drosophila", "C. elegans", "yeast", "bacteria", "Plasmodium",
        "cell culture", "organoid", "tissue section", "blood smear", "bone marrow smear", "cytology smear")],
    *[("stain", s) for s in (
        "H&E", "IHC", "Giemsa", "May-Grünwald-Giemsa", "Papanicolaou", "Gram", "PAS", "trichrome", "DAPI", "Hoechst",
        "phalloidin", "GFP", "T1-weighted", "T2-weighted", "FLAIR", "contrast-enhanced CT", "non-contrast")],
    *[("anatomy", a) for a in ("nucleus", "cytoplasm", "mitochondria", "retina", "optic nerve head", "chest",
                                "kidney", "bone marrow", "cervix")],
])
def test_required_terms_resolve(facet, raw):
    assert TAXONOMY.resolve(facet, raw) is not None, f"{facet}: {raw!r} does not resolve"


@pytest.mark.parametrize("modality, raw_sub_modality", AUTHOR_PAIRS)
def test_authors_sub_modalities_resolve_under_their_modality(modality, raw_sub_modality):
    term = TAXONOMY.resolve("sub_modality", raw_sub_modality)
    assert term is not None, raw_sub_modality
    assert TAXONOMY.get("modality", term.parent).name == modality


def test_abbreviations_map_to_full_names():
    assert TAXONOMY.resolve("stain", "H&E").name == "hematoxylin and eosin"
    assert TAXONOMY.resolve("modality", "CT").name == "computed tomography"
    assert TAXONOMY.resolve("modality", "MRI").name == "magnetic resonance imaging"
    assert TAXONOMY.resolve("sub_modality", "TEM").name == "transmission electron microscopy"
    assert TAXONOMY.resolve("sub_modality", "OCT").name == "optical coherence tomography"
    assert {"H&E", "CT", "MRI", "TEM", "OCT", "DAPI", "GFP", "FLAIR"} <= TAXONOMY.abbreviations()


def test_canonical_names_are_not_bare_acronyms():
    acronym = re.compile(r"\b[A-Z]{2,}\b")
    offenders = [(f, t.name) for f in TAXONOMY.facets for t in TAXONOMY.terms(f) if acronym.search(t.name)]
    assert offenders == []


def test_anatomy_is_a_tree_from_regions_to_compartments():
    chain = [t.id for t in TAXONOMY.ancestors("anatomy", "fovea")]
    assert chain == ["macula", "retina", "eye", "head", "whole_body"]
    assert [t.id for t in TAXONOMY.ancestors("anatomy", "mitochondrion")] == ["cytoplasm", "cell"]


def test_sub_modality_ancestors_cross_into_modality():
    assert [t.name for t in TAXONOMY.ancestors("sub_modality", "confocal_microscopy")] == ["fluorescence microscopy"]


def test_closest_suggests_a_near_spelling():
    assert TAXONOMY.closest("stain", "heamatoxylin and eosin").id == "hematoxylin_and_eosin"
    assert TAXONOMY.closest("anatomy", "hipocampus").id == "hippocampus"
    assert TAXONOMY.closest("anatomy", "qqqqqq") is None


@pytest.mark.parametrize("code, modality", [
    ("CT", "computed tomography"), ("MR", "magnetic resonance imaging"), ("US", "ultrasound imaging"),
    ("DX", "x-ray imaging"), ("CR", "x-ray imaging"), ("MG", "x-ray imaging"), ("XA", "x-ray imaging"),
    ("RF", "x-ray imaging"), ("SM", "digital pathology"), ("GM", "light microscopy"), ("ES", "endoscopy"),
    ("OP", "optical imaging"), ("OPT", "optical imaging"), ("XC", "clinical photography"),
])
def test_dicom_modality_codes_resolve(code, modality):
    """The build reads DICOM Modality headers through `resolve`; the standard codes must land on a modality."""
    assert TAXONOMY.resolve("modality", code).name == modality


def test_dicom_body_part_values_resolve_in_anatomy():
    for raw, name in [("ABDOMEN", "abdomen"), ("HEAD", "head"), ("CHEST", "thorax"), ("KNEE", "knee"),
                      ("BREAST", "breast"), ("WHOLE BODY", "whole body")]:
        assert TAXONOMY.resolve("anatomy", raw).name == name

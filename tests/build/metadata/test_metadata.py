"""Metadata: precedence (table > header > manifest), synonym resolution, and lazy pandera validation."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from support.build_manifests import make_manifest, write_aperio_slide, write_dicom, write_taxonomy

from mmbu.build.layouts import read_samples
from mmbu.build.layouts.sample import Sample, make_sample_id
from mmbu.build.metadata import (
    failure_summary,
    failures_to_exclusions,
    normalise_metadata,
    validate_metadata,
    write_failure_report,
)
from mmbu.build.schemas import METADATA_COLUMNS, metadata_schema


@pytest.fixture
def taxonomy(tmp_path):
    return write_taxonomy(tmp_path)


def sample(manifest, name, **fields):
    return Sample(sample_id=make_sample_id(manifest.id, name), dataset_id=manifest.id, source_path=name,
                  image_path=Path(name), **fields)


def test_manifest_defaults_synonyms_and_table_values_fill_the_fields(taxonomy):
    manifest = make_manifest({"kind": "folder_per_class"},
                             metadata={"domain": "haematology", "stain": "Pappenheim", "specimen": "Homo sapiens",
                                       "sub_modality": "Bright-field microscopy", "modality": "optical microscopy"})
    samples = [sample(manifest, "a.png"), sample(manifest, "b.png", row_metadata={"institution": "Site B"})]

    df = normalise_metadata(samples, manifest, taxonomy)

    assert list(df.columns) == list(METADATA_COLUMNS)
    first = df.iloc[0]
    assert (first.domain, first.modality, first.sub_modality, first.stain, first.specimen) == (
        "Hematology", "light microscopy", "brightfield microscopy", "May-Grünwald-Giemsa", "human")
    assert first.institution == "Demo University Hospital" and df.iloc[1].institution == "Site B"
    assert first.license == "CC-BY-4.0"
    valid, failures = validate_metadata(df, taxonomy)
    assert failures.empty and len(valid) == 2


def test_a_label_with_its_own_sub_modality_gives_it_to_its_samples_only(taxonomy):
    labels = {"MON": "monocyte", "PMY": {"name": "promyelocyte", "sub_modality": "phase contrast microscopy"}}
    manifest = make_manifest({"kind": "folder_per_class"}, labels=labels)
    samples = [sample(manifest, "a.png", label="MON"), sample(manifest, "b.png", label="PMY"),
               sample(manifest, "c.png", label="PMY", row_metadata={"sub_modality": "bright-field microscopy"})]

    df = normalise_metadata(samples, manifest, taxonomy)

    assert list(df.sub_modality) == ["brightfield microscopy", "phase contrast microscopy", "brightfield microscopy"]
    valid, failures = validate_metadata(df, taxonomy)
    assert failures.empty and len(valid) == 3


def test_headers_fill_fields_only_when_they_resolve(tmp_path, taxonomy):
    raw = tmp_path / "raw"
    write_dicom(raw / "MON" / "1.dcm", Modality="CT", BodyPartExamined="THORAX", InstitutionName="General Hospital")
    write_dicom(raw / "MON" / "2.dcm", Modality="OT")
    write_aperio_slide(raw / "PMY" / "slide.svs")
    manifest = make_manifest({"kind": "folder_per_class"},
                             metadata={"modality": "CT", "sub_modality": "conventional CT", "domain": "Radiology",
                                       "stain": None, "specimen_subregion": None})
    samples, _ = read_samples(manifest, raw)

    df = normalise_metadata(samples, manifest, taxonomy).set_index("dataset_id", drop=False)

    by_path = {s.source_path: row for s, (_, row) in zip(samples, df.iterrows())}
    ct = by_path["MON/1.dcm"]
    assert (ct.modality, ct.specimen_subregion, ct.institution) == ("computed tomography", "chest", "General Hospital")
    other = by_path["MON/2.dcm"]
    assert other.modality == "computed tomography" and other.institution == "Demo University Hospital"
    notes = df.attrs["notes"]
    assert len(notes) == 1 and "header dicom.Modality='OT' is not a taxonomy modality term" in notes[0].reason
    slide = by_path["PMY/slide.svs"]
    assert (slide.scanner_vendor, slide.objective_power, slide.microns_per_pixel) == ("aperio", 20.0, 0.499)
    assert validate_metadata(df.reset_index(drop=True), taxonomy)[1].empty


def test_every_failure_is_reported_at_once_per_sample_and_field(taxonomy, tmp_path):
    manifest = make_manifest({"kind": "folder_per_class"})
    good, unknown, mismatch, badurl = (sample(manifest, n) for n in ("good.png", "u.png", "m.png", "url.png"))
    df = normalise_metadata([good, unknown, mismatch, badurl], manifest, taxonomy)
    df.loc[1, "domain"] = "Astrology"
    df.loc[1, "specimen"] = None
    df.loc[2, "sub_modality"] = "conventional computed tomography"  # a CT sub-modality under light microscopy
    df.loc[3, "url"] = "zenodo record 5"
    df.loc[3, "license"] = "not a licence!"

    valid, failures = validate_metadata(df, taxonomy)

    assert list(valid["sample_id"]) == [good.sample_id]
    reasons = {(row.sample_id, row.field): row.reason for row in failures.itertuples()}
    assert reasons[(unknown.sample_id, "domain")] == "domain 'Astrology' is not a taxonomy domain term (nor a synonym of one)"
    assert reasons[(unknown.sample_id, "specimen")] == "specimen is missing"
    assert reasons[(mismatch.sample_id, "sub_modality")] == (
        "sub_modality 'conventional computed tomography' does not belong to modality 'light microscopy'")
    assert reasons[(badurl.sample_id, "url")] == "url 'zenodo record 5' is not an http(s) URL"
    assert reasons[(badurl.sample_id, "license")] == "license 'not a licence!' is not an SPDX licence expression"
    assert len(failures) == 5 and set(failures["dataset_id"]) == {"demo_marrow"}

    exclusions = failures_to_exclusions(failures)
    assert len(exclusions) == 3 and all(e.stage == "metadata" for e in exclusions)
    summary = failure_summary(failures)
    assert summary.set_index("field").loc["domain", "samples"] == 1
    report = pd.read_csv(write_failure_report(failures, tmp_path / "reports" / "metadata_failures.csv"))
    assert list(report.columns) == ["dataset_id", "sample_id", "field", "check", "value", "reason"]
    assert len(report) == 5 and not any(p.name.startswith(".") for p in (tmp_path / "reports").iterdir())


def test_duplicate_sample_ids_and_stray_columns(taxonomy):
    manifest = make_manifest({"kind": "folder_per_class"})
    df = normalise_metadata([sample(manifest, "a.png"), sample(manifest, "a.png")], manifest, taxonomy)
    _, failures = validate_metadata(df, taxonomy)
    assert set(failures["check"]) == {"field_uniqueness"}
    df = normalise_metadata([sample(manifest, "a.png")], manifest, taxonomy).assign(notes="x")
    valid, failures = validate_metadata(df, taxonomy)
    assert valid.empty and "unexpected column 'notes'" in failures.iloc[0]["reason"]


def test_the_schema_is_built_from_the_taxonomy(taxonomy):
    schema = metadata_schema(taxonomy)
    assert schema.strict and schema.coerce
    assert schema.columns["stain"].nullable and not schema.columns["modality"].nullable
    isin = schema.columns["specimen_subregion"].checks[0]
    assert set(isin.statistics["allowed_values"]) == {"bone marrow", "chest", "breast"}
    frame = pd.DataFrame({"x": [1]})
    with pytest.raises(Exception):
        schema.validate(frame)


def _failing_table(manifest, taxonomy) -> pd.DataFrame:
    names = [f"s{index}.png" for index in range(12)]
    df = normalise_metadata([sample(manifest, name) for name in names], manifest, taxonomy)
    for column in ("stain", "scanner_vendor", "modality", "objective_power"):
        df[column] = df[column].astype(object)
    df.loc[1, "domain"] = "Astrology"
    df.loc[2, "url"] = "ftp://x"
    df.loc[3, "topic"] = None
    df.loc[4, "stain"] = 3  # coerced to text, then not a term
    df.loc[5, "license"] = "nonsense"
    df.loc[6, "sample_id"] = df.loc[7, "sample_id"]
    df.loc[8, "objective_power"] = "forty"
    df.at[9, "scanner_vendor"] = {"a": 1}
    df.loc[10, "modality"] = 7
    return df


def test_text_columns_report_exactly_what_pandera_str_columns_report(taxonomy, monkeypatch):
    """`Text` only spares pandera a failure table when nothing failed: valid rows, failures and their checks and
    reasons are those of pandera's own `str` columns, for a clean table, one failing in every way and one without
    a column."""
    import numpy as np

    from mmbu.build import metadata, schemas

    manifest = make_manifest({"kind": "folder_per_class"})
    clean = normalise_metadata([sample(manifest, f"c{index}.png") for index in range(5)], manifest, taxonomy)
    failing = _failing_table(manifest, taxonomy)
    tables = [clean, failing, failing.drop(columns=["topic"])]

    def outcomes():
        metadata._SCHEMAS.clear()
        return [validate_metadata(table.copy(), taxonomy) for table in tables]

    with_text = outcomes()
    text = schemas.Text()
    monkeypatch.setattr(schemas, "Text", lambda: str)
    with_str = outcomes()
    metadata._SCHEMAS.clear()
    for (valid, failures), (str_valid, str_failures) in zip(with_text, with_str):
        pd.testing.assert_frame_equal(valid, str_valid)
        pd.testing.assert_frame_equal(failures, str_failures)
    assert len(with_text[0][0]) == 5 and with_text[0][1].empty
    assert len(with_text[1][1]) >= 9 and with_text[2][0].empty

    assert text.check(text, clean["topic"]) is True  # one True, no element-wise result to turn into a table
    pandera_str = type(text).__mro__[1]()
    for series in (clean["topic"], pd.Series(["a", 3, None], dtype=object), pd.Series(["a", None], dtype=object)):
        expected, got = pandera_str.check(text, series), text.check(text, series)
        if isinstance(expected, bool):
            assert got is expected
        elif np.all(expected):
            assert got is True
        else:
            assert np.array_equal(got, expected)

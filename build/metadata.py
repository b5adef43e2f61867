"""Fill the 13 metadata fields per sample and validate the table.

Where a value comes from, strongest first:
1. a per-sample value from the dataset's own label table (`metadata_columns` of the layout);
2. a file header (DICOM Modality -> modality, BodyPartExamined -> specimen_subregion,
   InstitutionName -> institution), used only when it resolves to a taxonomy term, because a
   header such as Modality "OT" says less than the curator's manifest;
3. the sample's label's own `sub_modality` (a class of images of another kind than the dataset's:
   a time-of-flight angiography series among T2-weighted ones);
4. the manifest's dataset-level `metadata`.

Raw terms are mapped to canonical names with `Taxonomy.resolve`; a value that does not resolve is
kept as written so that validation reports it (never silently replaced).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from weakref import WeakKeyDictionary

import pandas as pd
import pandera.pandas as pa

from mmbu.build.layouts.sample import Sample
from mmbu.build.schemas import FIELD_FACETS, METADATA_COLUMNS, SUB_MODALITY_CHECK, metadata_schema
from mmbu.core.exclusions import Exclusion
from mmbu.core.outputs import write_csv
from mmbu.curation.manifest import METADATA_FIELDS, DatasetManifest
from mmbu.taxonomy.model import Taxonomy

# header key -> metadata field it may fill
HEADER_FIELDS = {
    "dicom.Modality": "modality",
    "dicom.BodyPartExamined": "specimen_subregion",
    "dicom.InstitutionName": "institution",
}
FAILURE_COLUMNS = ("dataset_id", "sample_id", "field", "check", "value", "reason")


def canonical(taxonomy: Taxonomy, field: str, raw: object) -> str | None:
    """The taxonomy's canonical name for a raw value of a vocabulary field; free-text fields pass through."""
    if raw is None or (isinstance(raw, float) and pd.isna(raw)) or str(raw).strip() == "":
        return None
    text = str(raw).strip()
    facet = FIELD_FACETS.get(field)
    if facet is None or facet not in taxonomy.facets:
        return text
    term = taxonomy.resolve(facet, text)
    return term.name if term else text


def _number(raw: str | None) -> float | None:
    try:
        return float(raw) if raw not in (None, "") else None
    except ValueError:
        return None


def sample_metadata(sample: Sample, manifest: DatasetManifest, taxonomy: Taxonomy,
                    notes: list[Exclusion] | None = None) -> dict[str, object]:
    """One row of the metadata table (see the module docstring for precedence)."""
    values: dict[str, object] = manifest.metadata.model_dump()
    spec = manifest.label_spec(sample.label) if sample.label is not None else None
    if spec is not None and spec.sub_modality:
        values["sub_modality"] = spec.sub_modality
    for key, field in HEADER_FIELDS.items():
        raw = sample.file_metadata.get(key)
        if raw is None:
            continue
        facet = FIELD_FACETS.get(field)
        if facet is None or (facet in taxonomy.facets and taxonomy.resolve(facet, raw)):
            values[field] = raw
        elif notes is not None:
            notes.append(Exclusion(dataset_id=sample.dataset_id, sample_id=sample.sample_id, item=sample.source_path,
                                   stage="metadata", reason=f"header {key}={raw!r} is not a taxonomy {facet} term; "
                                                            f"the manifest's {field} {values.get(field)!r} is kept"))
    values.update(sample.row_metadata)
    row: dict[str, object] = {"sample_id": sample.sample_id, "dataset_id": sample.dataset_id}
    row.update({field: canonical(taxonomy, field, values.get(field)) for field in METADATA_FIELDS})
    row["license"] = manifest.license
    row["scanner_vendor"] = sample.file_metadata.get("slide.vendor")
    row["objective_power"] = _number(sample.file_metadata.get("slide.objective_power"))
    row["microns_per_pixel"] = _number(sample.file_metadata.get("slide.mpp_x"))
    return row


def normalise_metadata(samples: Iterable[Sample], manifest: DatasetManifest, taxonomy: Taxonomy) -> pd.DataFrame:
    """The metadata table of one dataset's samples, columns `schemas.METADATA_COLUMNS`.

    Header values that were ignored because they did not resolve are listed (as metadata-stage
    notes, not exclusions) in `df.attrs["notes"]`.
    """
    notes: list[Exclusion] = []
    rows = [sample_metadata(sample, manifest, taxonomy, notes) for sample in samples]
    df = pd.DataFrame(rows, columns=list(METADATA_COLUMNS))
    df[["objective_power", "microns_per_pixel"]] = df[["objective_power", "microns_per_pixel"]].astype(float)
    df.attrs["notes"] = notes
    return df


def _reason(field: str, check: str, value: object, row: Mapping[str, object] | None) -> str:
    if check == SUB_MODALITY_CHECK and row is not None:
        return f"sub_modality {row.get('sub_modality')!r} does not belong to modality {row.get('modality')!r}"
    if check.startswith("isin"):
        facet = FIELD_FACETS.get(field, field)
        return f"{field} {value!r} is not a taxonomy {facet} term (nor a synonym of one)"
    if check == "not_nullable":
        return f"{field} is missing"
    if check == "field_uniqueness":
        return f"{field} {value!r} occurs more than once"
    if check.startswith("str_matches") and field == "url":
        return f"url {value!r} is not an http(s) URL"
    if check == "spdx_expression":
        return f"license {value!r} is not an SPDX licence expression"
    if check.startswith("str_length"):
        return f"{field} is empty"
    if check.startswith("coerce_dtype") or check.startswith("dtype"):
        return f"{field} {value!r} has the wrong type ({check})"
    if check == "column_in_dataframe":
        return f"the table lacks the column {value!r}"
    if check == "column_in_schema":
        return f"the table has an unexpected column {value!r}"
    return f"{field} {value!r} fails {check}"


# the schema of each taxonomy object, built once per worker rather than once per dataset (as the taxonomy keeps
# its own lookups once made, with cached_property)
_SCHEMAS: WeakKeyDictionary[Taxonomy, pa.DataFrameSchema] = WeakKeyDictionary()


def _schema(taxonomy: Taxonomy) -> pa.DataFrameSchema:
    if taxonomy not in _SCHEMAS:
        _SCHEMAS[taxonomy] = metadata_schema(taxonomy)
    return _SCHEMAS[taxonomy]


def validate_metadata(df: pd.DataFrame, taxonomy: Taxonomy) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Validate the whole table at once; returns (valid rows, one failure per row x field x check).

    Failures are never swallowed: the second frame (columns `FAILURE_COLUMNS`) goes into the build
    report and `exclusions.csv`. A structural failure (missing or stray column) invalidates every row.
    """
    schema = _schema(taxonomy)
    try:
        valid = schema.validate(df, lazy=True)
        return valid, pd.DataFrame(columns=list(FAILURE_COLUMNS))
    except pa.errors.SchemaErrors as errors:
        cases = errors.failure_cases
    records: list[dict[str, object]] = []
    seen: set[tuple] = set()
    bad_index: set[object] = set()
    structural = False
    for case in cases.itertuples(index=False):
        index = case.index
        has_row = index is not None and not (isinstance(index, float) and pd.isna(index)) and index in df.index
        field = case.column if isinstance(case.column, str) else ""
        check = str(case.check)
        if check == SUB_MODALITY_CHECK:
            field = "sub_modality"  # one report per row, not one per column of the row
        key = (index if has_row else None, field, check)
        if key in seen:
            continue
        seen.add(key)
        row = df.loc[index].to_dict() if has_row else None
        if has_row:
            bad_index.add(index)
        else:
            structural = True
        value = case.failure_case if check != SUB_MODALITY_CHECK else (row or {}).get("sub_modality")
        records.append({
            "dataset_id": row.get("dataset_id") if row else None,
            "sample_id": row.get("sample_id") if row else None,
            "field": field or None,
            "check": check,
            "value": None if value is None or (isinstance(value, float) and pd.isna(value)) else str(value),
            "reason": _reason(field, check, value, row),
        })
    failures = pd.DataFrame(records, columns=list(FAILURE_COLUMNS))
    if structural:
        return df.iloc[0:0], failures
    remaining = df.drop(index=sorted(bad_index, key=str))
    return schema.validate(remaining, lazy=False), failures


class MetadataChecks:
    """`validate_metadata` over one dataset a chunk of samples at a time, with the outcome one call over the whole
    table gives: the same valid rows and the same failures, hence the same exclusions.

    Each check of the schema reads one row, except `sample_id`'s `unique=True`, which fails every row of an id
    that occurs more than once anywhere in the dataset. So the ids that repeat (`repeated_ids`, listed before the
    first chunk) are held out of their chunks, invalid, and validated together at the end, as the whole table
    would have them reported. Rows keep their position in the dataset as their index; a failure of the table
    itself (a missing or stray column: the same in every chunk) is reported once.
    """

    def __init__(self, manifest: DatasetManifest, taxonomy: Taxonomy, repeated_ids: frozenset[str] = frozenset()):
        self.manifest, self.taxonomy, self.repeated_ids = manifest, taxonomy, repeated_ids
        self._failures: list[pd.DataFrame] = []  # of failing rows only
        self._held: list[pd.DataFrame] = []  # the metadata rows of repeated ids
        self._rows = 0

    def validate(self, samples: Sequence[Sample]) -> pd.DataFrame:
        """The valid metadata rows of the next chunk of the dataset's samples."""
        table = normalise_metadata(samples, self.manifest, self.taxonomy)
        table.index = pd.RangeIndex(self._rows, self._rows + len(table))
        self._rows += len(table)
        if self.repeated_ids:
            repeated = table["sample_id"].isin(self.repeated_ids)
            if repeated.any():
                self._held.append(table[repeated])
                table = table[~repeated]
        valid, failures = validate_metadata(table, self.taxonomy)
        self._failures.append(failures)
        return valid

    def failures(self) -> pd.DataFrame:
        """Every failure so far (columns `FAILURE_COLUMNS`), in the order one call over the table lists them per
        sample."""
        parts = list(self._failures)
        if self._held:
            parts.append(validate_metadata(pd.concat(self._held), self.taxonomy)[1])
        parts = [part for part in parts if not part.empty] or parts[:1]  # an empty part would make columns object
        failures = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(FAILURE_COLUMNS))
        # a row always has its ids (a Sample's): a failure without them is the table's, repeated by every chunk
        of_table = failures["sample_id"].isna() & failures["dataset_id"].isna()
        repeated = of_table & failures.duplicated(["field", "check", "value", "reason"])
        return failures[~repeated].reset_index(drop=True)

    def exclusions(self) -> list[Exclusion]:
        return failures_to_exclusions(self.failures())


def failures_to_exclusions(failures: pd.DataFrame) -> list[Exclusion]:
    """One exclusion per invalid sample (all its failing fields in one sentence) for `exclusions.csv`."""
    exclusions = []
    for (dataset_id, sample_id), group in failures.groupby(["dataset_id", "sample_id"], dropna=False, sort=True):
        exclusions.append(Exclusion(dataset_id=str(dataset_id) if pd.notna(dataset_id) else "(unknown)",
                                    sample_id=sample_id if pd.notna(sample_id) else None,
                                    item=str(sample_id) if pd.notna(sample_id) else "(metadata table)",
                                    stage="metadata", reason="; ".join(group["reason"])))
    return exclusions


def failure_summary(failures: pd.DataFrame) -> pd.DataFrame:
    """Failures counted per dataset and field (the build report's table): dataset_id, field, samples, example."""
    if failures.empty:
        return pd.DataFrame(columns=["dataset_id", "field", "samples", "example"])
    grouped = failures.groupby(["dataset_id", "field"], dropna=False, sort=True)
    return grouped.agg(samples=("sample_id", "nunique"), example=("reason", "first")).reset_index()


def write_failure_report(failures: pd.DataFrame, path: str | Path) -> Path:
    """The validation failures as CSV (one line per sample x field x check), written temp + replace."""
    return write_csv(path, failures, FAILURE_COLUMNS)

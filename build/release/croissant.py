"""croissant.json (MLCommons Croissant 1.1): one FileObject per shard with its sha256, one RecordSet per
config reading the shards' columns, and `prov:wasDerivedFrom` naming every source dataset."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from mmbu.core.release import COLUMN_TYPES, IMAGE_COLUMNS, LIST_COLUMNS, RELEASE_COLUMNS
from mmbu.curation.manifest import DatasetManifest

CONTEXT = {  # Croissant 1.1's @context (spec Appendix 1; mlcroissant's `make_context` for 1.1) + prov
    "@language": "en",
    "@vocab": "https://schema.org/",
    "arrayShape": "cr:arrayShape",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "containedIn": "cr:containedIn",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/",
    "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isArray": "cr:isArray",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "prov": "http://www.w3.org/ns/prov#",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "samplingRate": "cr:samplingRate",
    "sc": "https://schema.org/",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
}
# column type (mmbu.core.release) -> Croissant data type (of the items, for lists); the others are text
DATA_TYPES = {"image": "sc:ImageObject", "int32": "sc:Integer", "float64": "sc:Float", "boxes": "sc:Integer"}
# list column types -> Croissant 1.1 `arrayShape` (§Field: `isArray`, `arrayShape`; "-1" is a simple list)
ARRAY_SHAPES = {"boxes": "-1,4", "strings": "-1"}


def spdx_url(license_id: str) -> str:
    return f"https://spdx.org/licenses/{license_id}.html"


def _field(config: str, column: str, fileset: str) -> dict:
    source: dict = {"fileSet": {"@id": fileset}, "extract": {"column": column}}
    if column in IMAGE_COLUMNS:
        source["transform"] = {"jsonPath": "bytes"}
    column_type = COLUMN_TYPES[column]
    field = {"@type": "cr:Field", "@id": f"{config}/{column}", "name": f"{config}/{column}",
             "dataType": DATA_TYPES.get(column_type, "sc:Text"), "source": source}
    if column in LIST_COLUMNS:  # lists: items of `dataType`, a box being four of them
        field["isArray"] = True
        field["arrayShape"] = ARRAY_SHAPES[column_type]
        if column_type == "boxes":
            field["description"] = "[x1, y1, x2, y2] boxes in image pixels (pixel edges; x2, y2 exclusive)"
    return field


def build_croissant(release_dir: Path, shards: Mapping[str, Sequence[Path]], digests: Mapping[Path, str],
                    manifests: Sequence[DatasetManifest], version: str, description: str, date_published: str,
                    url: str | None = None) -> dict:
    """The JSON-LD document for a release whose shards are written and hashed (`digests`: path -> sha256)."""
    distribution: list[dict] = []
    record_sets: list[dict] = []
    for config, paths in shards.items():
        for path in paths:
            name = path.relative_to(release_dir).as_posix()
            distribution.append({"@type": "cr:FileObject", "@id": name, "name": name, "contentUrl": name,
                                 "encodingFormat": "application/x-parquet", "sha256": digests[path]})
        fileset = f"{config}-parquet"
        distribution.append({"@type": "cr:FileSet", "@id": fileset, "name": fileset,
                             "encodingFormat": "application/x-parquet",
                             "includes": f"data/{config}/*.parquet"})
        record_sets.append({"@type": "cr:RecordSet", "@id": config, "name": config,
                            "description": f"Rows of the {config} task (split test).",
                            "key": {"@id": f"{config}/sample_id"},
                            "field": [_field(config, column, fileset) for column in RELEASE_COLUMNS]})
    licences = sorted({m.license for m in manifests})
    document = {
        "@context": CONTEXT,
        "@type": "sc:Dataset",
        "name": "MMBU-rebuilt",
        "description": description,
        "conformsTo": "http://mlcommons.org/croissant/1.1",
        "citeAs": "MMBU: Massive Multi-modal Biomedical Understanding benchmark (ECCV 2026), rebuilt with the "
                  "MMBU toolkit; cite every source dataset listed in prov:wasDerivedFrom.",
        "license": [spdx_url(lic) for lic in licences],
        "version": version,
        "datePublished": date_published,
        "isLiveDataset": False,
        # one node per source: no `@id` (a homepage is no identifier: two datasets from one project share it, and
        # JSON-LD merges objects with one `@id`); `identifier` is the rows' `dataset_id`
        "prov:wasDerivedFrom": [
            {"identifier": m.id, "name": m.title, "url": m.homepage or m.metadata.url,
             "license": spdx_url(m.license), "citation": m.citation}
            for m in sorted(manifests, key=lambda m: m.id)
        ],
        "distribution": distribution,
        "recordSet": record_sets,
    }
    if url:
        document["url"] = url
    return document

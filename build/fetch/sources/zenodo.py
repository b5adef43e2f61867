"""Zenodo version records: `GET {MMBU_ZENODO_URL}/api/records/<id>`, licence re-checked (with discovery's
licence table, `mmbu.core.licences`), md5 verified."""
from __future__ import annotations

import os
from urllib.parse import quote

from mmbu.build.fetch.download import DownloadRequest
from mmbu.build.fetch.model import FetchedFile, FetchError
from mmbu.build.fetch.sources.context import FetchContext, RemoteContext, RemoteFile, stated_size
from mmbu.build.fetch.sources.host_record import refuse_changed_licence, wanted_files
from mmbu.core.licences import to_spdx
from mmbu.curation.manifest.source import ZenodoSource

DEFAULT_URL = "https://zenodo.org"


def zenodo_base_url() -> str:
    return (os.environ.get("MMBU_ZENODO_URL") or DEFAULT_URL).rstrip("/")


def check_licence(record: dict, source: ZenodoSource, manifest_licence: str) -> None:
    """Fail loudly when the record's licence no longer matches the manifest (it can change between reviews)."""
    licence = (record.get("metadata") or {}).get("license") or {}
    zenodo_id = licence.get("id") if isinstance(licence, dict) else None
    reading = to_spdx(zenodo_id, "zenodo") if zenodo_id else (False, None)  # the table discovery screened it with
    refuse_changed_licence(f"Zenodo record {source.record}", zenodo_id, reading, manifest_licence)


def wanted_entries(source: ZenodoSource, context: FetchContext | RemoteContext) -> tuple[str, list[dict]]:
    """(base URL, the record's file entries the manifest asks for), after the licence check."""
    base = zenodo_base_url()
    record = context.session.get_json(f"{base}/api/records/{source.record}", use_cache=False)
    if not isinstance(record, dict):
        raise FetchError(f"Zenodo record {source.record}: the answer is not a record (a JSON {type(record).__name__})")
    check_licence(record, source, context.licence)
    return base, wanted_files(f"Zenodo record {source.record}", record.get("files"), "key", source.files)


def fetch_zenodo(source: ZenodoSource, context: FetchContext) -> list[FetchedFile]:
    base, entries = wanted_entries(source, context)
    fetched = []
    for entry in entries:
        key = entry["key"]
        checksum = entry.get("checksum") or ""
        url = (entry.get("links") or {}).get("self") or ""
        if not url.startswith(base + "/"):  # missing, or pointing elsewhere than MMBU_ZENODO_URL says
            url = f"{base}/api/records/{source.record}/files/{quote(key)}/content"
        fetched.append(context.download(DownloadRequest(
            url=url, name=key, size=stated_size(entry.get("size")),
            md5=checksum.removeprefix("md5:") if checksum.startswith("md5:") else None,
        )))
    return fetched


def zenodo_remote_files(source: ZenodoSource, context: RemoteContext) -> list[RemoteFile]:
    """The record's files with the sizes Zenodo states (one metadata request; the licence is re-checked)."""
    _, entries = wanted_entries(source, context)
    return [RemoteFile(name=entry["key"], size=stated_size(entry.get("size")), basis="zenodo") for entry in entries]


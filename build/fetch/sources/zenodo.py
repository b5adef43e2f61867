"""Zenodo version records: `GET {MMBU_ZENODO_URL}/api/records/<id>`, licence re-checked (with discovery's
licence table, `mmbu.core.licences`), md5 verified."""
from __future__ import annotations

import os
from urllib.parse import quote

from mmbu.build.fetch.download import DownloadRequest
from mmbu.build.fetch.model import FetchedFile, FetchError
from mmbu.build.fetch.sources.context import FetchContext, RemoteContext, RemoteFile
from mmbu.core.licences import same_licence, to_spdx
from mmbu.core.text import shorten
from mmbu.curation.manifest.source import ZenodoSource

DEFAULT_URL = "https://zenodo.org"


def zenodo_base_url() -> str:
    return (os.environ.get("MMBU_ZENODO_URL") or DEFAULT_URL).rstrip("/")


def check_licence(record: dict, source: ZenodoSource, manifest_licence: str) -> None:
    """Fail loudly when the record's licence no longer matches the manifest (it can change between reviews)."""
    licence = (record.get("metadata") or {}).get("license") or {}
    zenodo_id = licence.get("id") if isinstance(licence, dict) else None
    if not zenodo_id:
        raise FetchError(f"licence changed: Zenodo record {source.record} no longer states a licence "
                         f"(the manifest says {manifest_licence}); review the dataset before fetching")
    known, spdx = to_spdx(zenodo_id, "zenodo")  # the table discovery screened the record with
    if spdx is None:
        why = "not a clear licence" if known else "not a known licence"
        raise FetchError(f"licence changed: Zenodo record {source.record} is now {zenodo_id!r} ({why}), "
                         f"the manifest says {manifest_licence}; review the dataset before fetching")
    if not same_licence(spdx, manifest_licence):
        raise FetchError(f"licence changed: Zenodo record {source.record} is now {zenodo_id!r} "
                         f"({spdx}), the manifest says {manifest_licence}; review the dataset before fetching")


def wanted_entries(source: ZenodoSource, context: FetchContext | RemoteContext) -> tuple[str, list[dict]]:
    """(base URL, the record's file entries the manifest asks for), after the licence check."""
    base = zenodo_base_url()
    record = context.session.get_json(f"{base}/api/records/{source.record}", use_cache=False)
    if not isinstance(record, dict):
        raise FetchError(f"Zenodo record {source.record}: the answer is not a record (a JSON {type(record).__name__})")
    check_licence(record, source, context.licence)
    entries = {}
    for entry in record.get("files") or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
            raise FetchError(f"Zenodo record {source.record} lists a file without a key ({shorten(repr(entry), 80)})")
        entries[entry["key"]] = entry
    wanted = source.files or sorted(entries)
    missing = [key for key in wanted if key not in entries]
    if missing:
        raise FetchError(f"Zenodo record {source.record} has no file(s) {', '.join(missing)} "
                         f"(it has: {', '.join(sorted(entries)) or 'none'})")
    return base, [entries[key] for key in wanted]


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


def stated_size(value: object) -> int | None:
    """A size as a host states it, when it is one (a count of bytes); anything else is no statement."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

"""What a host's record states, read the same way for every host with such a record (Zenodo, figshare): its licence
now, checked against the manifest's before anything is downloaded (it can change between reviews), and its file
list, from which the manifest's files are picked."""
from __future__ import annotations

from mmbu.build.fetch.model import FetchError
from mmbu.core.licences import same_licence
from mmbu.core.text import shorten


def refuse_changed_licence(item: str, stated: str | None, reading: tuple[bool, str | None],
                           manifest_licence: str) -> None:
    """FetchError unless the host's licence is the manifest's.

    `item` names the record ("Zenodo record 12"); `stated` is the host's own spelling of its licence (None: it
    states none); `reading` is `(known, spdx)` as `mmbu.core.licences.to_spdx` reads that spelling."""
    if not stated:
        raise FetchError(f"licence changed: {item} no longer states a licence (the manifest says {manifest_licence}); "
                         "review the dataset before fetching")
    known, spdx = reading
    if spdx is None:
        why = "not a clear licence" if known else "not a known licence"
        raise FetchError(f"licence changed: {item} is now {stated!r} ({why}), the manifest says {manifest_licence}; "
                         "review the dataset before fetching")
    if not same_licence(spdx, manifest_licence):
        raise FetchError(f"licence changed: {item} is now {stated!r} ({spdx}), the manifest says {manifest_licence}; "
                         "review the dataset before fetching")


def wanted_files(item: str, listed: object, name_field: str, wanted: list[str] | None) -> list[dict]:
    """The entries of `listed` (the record's file list, each entry naming its file in `name_field`) that the manifest
    asks for, in its order; all of them, sorted by name, when it names none. FetchError naming the record and the
    file for an entry without a name, a name listed twice or a wanted file the record does not list."""
    entries: dict[str, dict] = {}
    for entry in listed if isinstance(listed, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get(name_field), str):
            raise FetchError(f"{item} lists a file without a {name_field} ({shorten(repr(entry), 80)})")
        if entry[name_field] in entries:
            raise FetchError(f"{item} lists two files named {entry[name_field]!r}; the manifest cannot tell them apart")
        entries[entry[name_field]] = entry
    names = wanted or sorted(entries)
    missing = [name for name in names if name not in entries]
    if missing:
        raise FetchError(f"{item} has no file(s) {', '.join(missing)} (it has: {', '.join(sorted(entries)) or 'none'})")
    return [entries[name] for name in names]

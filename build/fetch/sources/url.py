"""Plain HTTP(S) files, with optional md5/sha256 from the manifest."""
from __future__ import annotations

from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

from mmbu.build.fetch.download import DownloadRequest, stated_total_size
from mmbu.build.fetch.model import FetchedFile, FetchError
from mmbu.build.fetch.sources.context import FetchContext, RemoteContext, RemoteFile
from mmbu.core.confinement import name_problem
from mmbu.curation.manifest.source import UrlSource


def file_name_for(url: str, name: str | None) -> str:
    chosen = name or unquote(PurePosixPath(urlsplit(url).path).name)
    if name_problem(chosen):
        raise FetchError(f"cannot use {chosen!r} as a file name for {url} (it {name_problem(chosen)}); set `name:` "
                         "in the manifest")
    return chosen


def fetch_url(source: UrlSource, context: FetchContext) -> list[FetchedFile]:
    fetched = []
    for entry in source.files:
        name = file_name_for(entry.url, entry.name)
        fetched.append(context.download(DownloadRequest(url=entry.url, name=name, md5=entry.md5,
                                                        sha256=entry.sha256)))
    return fetched


def url_stated_digests(source: UrlSource) -> dict[str, dict[str, str]]:
    """File name under raw/<id>/ -> the digests the manifest states for it ({"md5": ..., "sha256": ...})."""
    stated = {}
    for entry in source.files:
        digests = {kind: value for kind, value in (("md5", entry.md5), ("sha256", entry.sha256)) if value}
        if digests:
            stated[file_name_for(entry.url, entry.name)] = digests
    return stated


def url_remote_files(source: UrlSource, context: RemoteContext) -> list[RemoteFile]:
    """Each file's size from a one-byte ranged GET (`Content-Range: bytes 0-0/<size>`), or the full answer's
    Content-Length when the server ignores ranges; the connection is closed before the body is read."""
    files = []
    for entry in source.files:
        with context.session.stream(entry.url, headers={"Range": "bytes=0-0", "Accept-Encoding": "identity"}) as answer:
            files.append(RemoteFile(name=file_name_for(entry.url, entry.name), size=stated_total_size(answer),
                                    basis="content-range"))
    return files


"""figshare articles at a version: `GET {MMBU_FIGSHARE_URL}/v2/articles/<id>/versions/<v>`, licence re-checked,
files downloaded from their `download_url` with figshare's `computed_md5` verified.

The API's shape, as read in figshare's own API documentation (github.com/figshare/user_documentation at 19641e5,
swagger_documentation/swagger.json: `ArticleComplete` for `/articles/{id}` and `/articles/{id}/versions/{v}`,
with `version`, `license` (`License`: value, name, url), `files` (`PublicFile`: id, name, size, is_link_only,
download_url, supplied_md5, computed_md5) and `download_disabled`; docs/api/presenters/article.md: on public
endpoints `files` is missing while an article is under file embargo or confidential). Field names checked against
a client that calls the real API: fatiando/pooch at accc726, pooch/downloaders.py `FigshareRepository` (reads
`/v2/articles/{id}/versions/{v}`, each file's `name`, `download_url` and `computed_md5`).

The version's own record may list only "up to 10 article files": so says a client generated from figshare's newer API
description (its `ArticleComplete.files`; read through a code search that did not name the repository, so unverified
here; the swagger.json above says only "List of article files"). The same description lists
`GET /articles/{article_id}/versions/{version_id}/files` with `page` and `page_size` (default 10), so the files are
read from that list, page by page, whichever holds (a host without it, 404, gives the record's own list).

A manifest without `version` is fetched at the version manifests.lock pins, or on the first fetch at the version
`/v2/articles/<id>` reports (then pinned), so the files cannot move under a pinned sha256.
"""
from __future__ import annotations

import os
import re

from mmbu.build.fetch.download import DownloadRequest
from mmbu.build.fetch.model import FetchedFile, FetchError
from mmbu.build.fetch.sources.context import FetchContext, RemoteContext, RemoteFile, stated_size
from mmbu.build.fetch.sources.host_record import refuse_changed_licence, wanted_files
from mmbu.core.licences import spdx_from_url, to_spdx
from mmbu.core.text import shorten
from mmbu.curation.http import HttpError
from mmbu.curation.manifest.source import FigshareSource

DEFAULT_URL = "https://api.figshare.com"
MD5 = re.compile(r"^[0-9a-f]{32}$")


def figshare_base_url() -> str:
    return (os.environ.get("MMBU_FIGSHARE_URL") or DEFAULT_URL).rstrip("/")


def current_version(source: FigshareSource, context: FetchContext | RemoteContext) -> int:
    """The article's current version number (`version` of `/v2/articles/<id>`)."""
    article = context.session.get_json(f"{figshare_base_url()}/v2/articles/{source.article}", use_cache=False)
    version = article.get("version") if isinstance(article, dict) else None
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise FetchError(f"figshare article {source.article}: the API states no version number, so the version cannot "
                         "be pinned; write `version:` in the manifest (the DOI's .v<N>)")
    return version


def licence_reading(licence: object) -> tuple[str | None, tuple[bool, str | None]]:
    """(figshare's spelling of the licence, `(known, spdx)`): by its URL first, else by its name."""
    if not isinstance(licence, dict):
        return None, (False, None)
    name, url = licence.get("name"), licence.get("url")
    name = name if isinstance(name, str) and name.strip() else None
    url = url if isinstance(url, str) and url.strip() else None
    stated = " ".join(filter(None, (name, f"<{url}>" if url else None))) or None
    if url and (spdx := spdx_from_url(url)):
        return stated, (True, spdx)
    return stated, to_spdx(name, "figshare") if name else (False, None)


def wanted_entries(source: FigshareSource, version: int, context: FetchContext | RemoteContext) -> list[dict]:
    """The version's file entries the manifest asks for, after the licence check."""
    item = f"figshare article {source.article} version {version}"
    article = context.session.get_json(f"{figshare_base_url()}/v2/articles/{source.article}/versions/{version}",
                                       use_cache=False)
    if not isinstance(article, dict):
        raise FetchError(f"{item}: the answer is not an article (a JSON {type(article).__name__})")
    stated, reading = licence_reading(article.get("license"))
    refuse_changed_licence(item, stated, reading, context.licence)
    if article.get("download_disabled") is True:
        raise FetchError(f"{item}: figshare has disabled downloading its files")
    if not isinstance(article.get("files"), list):
        raise FetchError(f"{item} lists no files (figshare leaves them out while an article is under file embargo "
                         "or confidential)")
    return wanted_files(item, version_files(source, version, context, article["files"]), "name", source.files)


PAGE_SIZE = 100  # figshare's default page is 10 files; its documented offsets stop at 1,000 (ten pages of 100)
MAX_PAGES = 10


def version_files(source: FigshareSource, version: int, context: FetchContext | RemoteContext,
                  listed: list[dict]) -> list[dict]:
    """Every file entry of the version, read from its paged file list; `listed` (the version record's own list) where
    the host has no such list (404)."""
    item = f"figshare article {source.article} version {version}"
    url = f"{figshare_base_url()}/v2/articles/{source.article}/versions/{version}/files"
    files: list[dict] = []
    seen: set[object] = set()
    for page in range(1, MAX_PAGES + 1):
        try:
            batch = context.session.get_json(url, params={"page": page, "page_size": PAGE_SIZE}, use_cache=False)
        except HttpError as exc:
            if exc.status == 404 and page == 1:
                return listed
            raise
        if not isinstance(batch, list) or not all(isinstance(entry, dict) for entry in batch):
            raise FetchError(f"{item}: page {page} of its file list is not a JSON list of files")
        new = [entry for entry in batch if (entry.get("id"), entry.get("name")) not in seen]
        seen |= {(entry.get("id"), entry.get("name")) for entry in new}
        files += new
        if len(batch) < PAGE_SIZE or not new:  # the last page, or a host that ignores paging
            return files
    raise FetchError(f"{item} lists more than {PAGE_SIZE * MAX_PAGES} files, more than figshare's API pages through")


def download_url(entry: dict, source: FigshareSource, version: int) -> str:
    url = entry.get("download_url")
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        raise FetchError(f"figshare article {source.article} version {version}: file {entry['name']!r} has no "
                         f"download_url ({shorten(repr(url), 80)})")
    return url


def fetch_figshare(source: FigshareSource, context: FetchContext) -> list[FetchedFile]:
    version = context.pinned_or_resolved("version", source.version, lambda: current_version(source, context))
    fetched = []
    for entry in wanted_entries(source, version, context):
        md5 = entry.get("computed_md5")  # figshare's own digest of the stored bytes (empty for a link-only file)
        fetched.append(context.download(DownloadRequest(
            url=download_url(entry, source, version), name=entry["name"], size=stated_size(entry.get("size")),
            md5=md5 if isinstance(md5, str) and MD5.match(md5) else None,
        )))
    return fetched


def figshare_remote_files(source: FigshareSource, context: RemoteContext) -> list[RemoteFile]:
    """The version's files with the sizes figshare states (the pinned version, else the current one, which is what
    the first fetch will pin); the licence is re-checked."""
    version = source.version or context.pinned.get("version") or current_version(source, context)
    return [RemoteFile(name=entry["name"], size=stated_size(entry.get("size")), basis="figshare")
            for entry in wanted_entries(source, version, context)]

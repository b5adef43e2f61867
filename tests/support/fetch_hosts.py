"""Replicas of the dataset hosts for fetch tests (Zenodo record, figshare article + files) and archive builders."""
from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from collections.abc import Callable
from typing import Any

from support.hub_server import LFS_SUFFIXES
from support.loopback import LoopbackServer, Reply, Request, file_with_range


def make_zip(members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as bundle:
        for name, data in members.items():
            bundle.writestr(name, data)
    return buffer.getvalue()


def make_tar(members: dict[str, bytes], mode: str = "w:gz") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as bundle:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            bundle.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def serve_zenodo_record(server: LoopbackServer, record: int, files: dict[str, bytes], *,
                        licence: str | None = "cc-by-4.0", checksums: dict[str, str] | None = None,
                        sizes: dict[str, int] | None = None) -> Reply:
    """Serve a Zenodo version record in the legacy JSON shape (reference/discovery-apis.md §1.3/§1.7) and its
    files; returns the record reply."""
    entries = []
    for key, data in files.items():
        entries.append({
            "id": f"uuid-{key}", "key": key, "size": (sizes or {}).get(key, len(data)),
            "checksum": f"md5:{(checksums or {}).get(key, md5(data))}",
            "links": {"self": f"{server.url}/api/records/{record}/files/{key}/content"},
        })
        server.add("GET", f"/api/records/{record}/files/{key}/content", file_with_range(data, etag=f'"{md5(data)}"'))
    metadata: dict[str, Any] = {"title": "Demo", "access_right": "open", "resource_type": {"type": "dataset"}}
    if licence:
        metadata["license"] = {"id": licence}
    reply = Reply(200, {
        "id": record, "recid": str(record), "doi": f"10.5281/zenodo.{record}", "metadata": metadata,
        "links": {"self": f"{server.url}/api/records/{record}"}, "files": entries, "status": "published",
    }, {"X-RateLimit-Limit": "133", "X-RateLimit-Remaining": "120"})
    server.add("GET", f"/api/records/{record}", reply)
    return reply


CC_BY_4 = {"value": 1, "name": "CC BY 4.0", "url": "https://creativecommons.org/licenses/by/4.0/"}


def serve_figshare_article(server: LoopbackServer, article: int, versions: dict[int, dict[str, bytes]], *,
                           licence: dict[str, Any] | None = CC_BY_4, checksums: dict[str, str] | None = None) -> None:
    """Serve a figshare article (synthetic) in the API v2 shape figshare documents (swagger.json `ArticleComplete`,
    `PublicFile`, `License`): `/v2/articles/<id>` answers with the newest version, `/v2/articles/<id>/versions/<v>`
    with that version, each file's `download_url` on `/ndownloader/files/<file id>` (figshare's is
    ndownloader.figshare.com/files/<id>) and its `computed_md5` (`checksums` overrides it, to corrupt it)."""
    def version_record(version: int, files: dict[str, bytes]) -> dict[str, Any]:
        entries = []
        for index, (name, data) in enumerate(files.items()):
            file_id = article * 100 + version * 10 + index
            server.add("GET", f"/ndownloader/files/{file_id}", file_with_range(data, etag=f'"{md5(data)}"'))
            entries.append({"id": file_id, "name": name, "size": len(data), "is_link_only": False,
                            "download_url": f"{server.url}/ndownloader/files/{file_id}",
                            "supplied_md5": md5(data), "computed_md5": (checksums or {}).get(name, md5(data)),
                            "mimetype": "application/octet-stream"})
        record: dict[str, Any] = {
            "id": article, "title": "Synthetic test article", "doi": f"10.6084/m9.figshare.{article}.v{version}",
            "version": version, "defined_type": 3, "defined_type_name": "dataset", "is_embargoed": False,
            "download_disabled": False, "figshare_url": f"https://figshare.com/articles/dataset/test/{article}",
            "url_public_api": f"{server.url}/v2/articles/{article}", "files": entries,
        }
        if licence is not None:
            record["license"] = licence
        return record

    def file_pages(entries: list[dict[str, Any]]) -> Callable[[Request], Reply]:
        def page(request: Request) -> Reply:
            number, size = int(request.arg("page", "1")), int(request.arg("page_size", "10"))
            return Reply(200, entries[(number - 1) * size:number * size])
        return page

    records = {version: version_record(version, files) for version, files in versions.items()}
    for version, record in records.items():
        server.add("GET", f"/v2/articles/{article}/versions/{version}/files", file_pages(record["files"]))
        # as figshare's reference says of `ArticleComplete.files`: "List of up to 10 article files"
        server.add("GET", f"/v2/articles/{article}/versions/{version}", Reply(200, {**record,
                                                                                      "files": record["files"][:10]}))
    server.add("GET", f"/v2/articles/{article}", Reply(200, {**records[max(records)],
                                                             "files": records[max(records)]["files"][:10]}))


def serve_hf_dataset(server: LoopbackServer, repo: str, revision: str, files: dict[str, bytes], *,
                     cut_first_at: dict[str, int] | None = None) -> None:
    """The Hub endpoints a fetch at a commit sha uses: the tree listing (`/api/datasets/<repo>/tree/<rev>`), repo
    info (`/revision/<rev>`) and `/datasets/<repo>/resolve/<rev>/<path>` with `X-Repo-Commit`, `ETag` and Range.
    As on the Hub, a file its default `.gitattributes` stores in LFS (`.parquet`, `.png`, `.arrow`) is answered with
    a redirect to the storage (`/lfs-objects/<sha256>` on `localhost` here), which serves the bytes; `cut_first_at`
    drops a file's first full answer after that many bytes (a broken connection)."""
    tree = [{"type": "file", "oid": hashlib.sha1(data).hexdigest(), "size": len(data), "path": path}
            for path, data in files.items()]
    server.add("GET", f"^/api/datasets/{repo}/tree/{revision}", Reply(200, tree))
    server.add("GET", f"/api/datasets/{repo}/revision/{revision}", Reply(200, {
        "_id": "66a1b2c3d4e5f60718293a4b", "id": repo, "sha": revision, "private": False, "gated": False,
        "siblings": [{"rfilename": path} for path in files]}))
    served = {path: file_with_range(data, etag=f'"{hashlib.sha1(data).hexdigest()}"',
                                    cut_first_at=(cut_first_at or {}).get(path)) for path, data in files.items()}
    for path, data in files.items():
        if path.endswith(LFS_SUFFIXES):
            server.add("HEAD", f"/lfs-objects/{sha256(data)}", served[path])
            server.add("GET", f"/lfs-objects/{sha256(data)}", served[path])

    storage = server.url.replace("127.0.0.1", "localhost")  # another host name, as the Hub's storage has

    def resolve(request: Request) -> Reply:
        path = request.path.split(f"/resolve/{revision}/", 1)[1]
        if path not in files:
            return Reply(404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"})
        if path.endswith(LFS_SUFFIXES):
            return Reply(302, b"", {"Location": f"{storage}/lfs-objects/{sha256(files[path])}",
                                    "X-Repo-Commit": revision, "X-Linked-Size": str(len(files[path])),
                                    "X-Linked-Etag": f'"{sha256(files[path])}"'})
        reply = served[path](request)
        reply.headers["X-Repo-Commit"] = revision
        return reply

    server.add("HEAD", f"^/datasets/{repo}/resolve/{revision}/", resolve)
    server.add("GET", f"^/datasets/{repo}/resolve/{revision}/", resolve)

"""A replay of the four discovery sources on the loopback server, shaped exactly like the real APIs
(reference/discovery-apis.md): Zenodo legacy JSON with `links.next` absent on the last page and a 429 with
Retry-After first; Hub arrays with an absolute `Link` header; Kaggle ListDatasets with `nextPageToken`;
unknown keys everywhere. Routes answer by the search words, so different queries find different records.

Loaded by the conftest files of tests/curation/sources and tests/curation/agent.
"""
from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path

from support.loopback import LoopbackServer, Reply, Request

PWC_INDEX = Path(__file__).parent / "data" / "pwc-index.jsonl"
ZENODO_PAGE = 2  # hits per replayed page, small so that a short search spans pages


def zenodo_hit(base: str, record_id: int, title: str, licence: object, keywords: list[str], description: str,
               files: list[str] = ("images.zip",), related: list[dict] | None = None,
               resource_type: dict | None = None, sizes: dict[str, int] | None = None) -> dict:
    """One hit in the legacy shape. `resource_type` as the legacy serializer dumps it: the RDM id split into
    `type` and `subtype` ({"type": "image", "subtype": "photo", "title": "Photo"})."""
    metadata = {
        "title": title, "doi": f"10.5281/zenodo.{record_id}", "publication_date": "2024-05-02",
        "description": f"<p>{description}</p>", "access_right": "open",
        "creators": [{"name": "Doe, Jane", "affiliation": "Example University"}],
        "keywords": keywords, "version": "1.0",
        "resource_type": resource_type or {"title": "Dataset", "type": "dataset"},
        "communities": [{"id": "medical-imaging"}],
        "relations": {"version": [{"index": 0, "is_last": True, "parent": {"pid_type": "recid", "pid_value": str(record_id - 1)}}]},
    }
    if licence is not ...:
        metadata["license"] = licence
    if related:
        metadata["related_identifiers"] = related
    return {
        "created": "2024-05-02T10:11:12.345678+00:00", "modified": "2024-05-03T08:00:00.000000+00:00",
        "id": record_id, "conceptrecid": str(record_id - 1), "doi": f"10.5281/zenodo.{record_id}",
        "conceptdoi": f"10.5281/zenodo.{record_id - 1}", "doi_url": f"https://doi.org/10.5281/zenodo.{record_id}",
        "metadata": metadata, "title": title,
        "links": {"self": f"{base}/api/records/{record_id}", "self_html": f"{base}/records/{record_id}",
                  "files": f"{base}/api/records/{record_id}/files", "preview_html": f"{base}/records/{record_id}?preview=1",
                  "self_iiif_manifest": f"{base}/api/iiif/record:{record_id}/manifest"},
        "updated": "2024-05-03T08:00:00.000000+00:00", "recid": str(record_id), "revision": 4,
        "files": [{"id": f"uuid-{record_id}-{i}", "key": name, "size": (sizes or {}).get(name, 1000 + i), "checksum": "md5:7e479156b3545479cefae3e95c42ddbf",
                   "links": {"self": f"{base}/api/records/{record_id}/files/{name}/content"}} for i, name in enumerate(files)],
        "swh": {}, "owners": [{"id": "48746"}], "status": "published",
        "stats": {"downloads": 120, "unique_downloads": 80, "views": 900, "unique_views": 700},
        "state": "done", "submitted": True,
    }


def zenodo_records(base: str) -> list[dict]:
    return [
        zenodo_hit(base, 11012345, "Annotated chest radiograph dataset for pneumothorax segmentation",
                   {"id": "cc-by-4.0"}, ["chest X-ray", "radiology", "segmentation"],
                   "1,200 frontal CXRs with pixel masks drawn by two board-certified radiologists."),
        zenodo_hit(base, 11020001, "Blood smear brightfield microscopy images with cell annotations",
                   {"id": "cc-zero"}, ["microscopy", "blood smear", "hematology"],
                   "Brightfield microscopy images of human peripheral blood smears; cells boxed by haematologists."),
        zenodo_hit(base, 11020002, "PathVQA images re-release for chest radiograph and pathology QA",
                   {"id": "cc-by-4.0"}, ["vqa", "chest radiograph"], "Images and questions from PathVQA."),
        zenodo_hit(base, 11020003, "Chest radiograph reading times survey", None, ["chest radiograph", "survey"],
                   "Questionnaire answers of radiologists about reading chest radiograph studies.", files=["answers.csv"]),
        zenodo_hit(base, 11020004, "Chest radiograph lines and tubes detection", ..., ["chest radiograph", "detection"],
                   "Chest X-ray images with boxes around catheters, by radiologists."),
        zenodo_hit(base, 11020005, "Brightfield microscopy of stained tissue cores", {"id": "cc-nc"},
                   ["brightfield microscopy", "histology"], "Brightfield microscopy tiles annotated by pathologists."),
        *zenodo_image_records(base),
    ]


FIGURE = {"title": "Figure", "type": "image", "subtype": "figure"}
PHOTO = {"title": "Photo", "type": "image", "subtype": "photo"}


def zenodo_image_records(base: str) -> list[dict]:
    """Records uploaded as resource type image: one figure, a 40-TIFF collection, a photo archive, 3 photos."""
    return [
        zenodo_hit(base, 11030001, "Chest radiograph of a tension pneumothorax (figure 2)", {"id": "cc-by-4.0"},
                   ["chest radiograph", "case report"], "Figure 2 of our case report: a frontal chest radiograph.",
                   files=["figure2.png"], resource_type=FIGURE),
        zenodo_hit(base, 11030002, "Chest radiograph rib fracture collection", {"id": "cc-by-4.0"},
                   ["chest radiograph", "rib fracture", "detection"],
                   "Digitised chest radiographs with rib fractures boxed by two radiologists.",
                   files=[f"rib_{i:03d}.tif" for i in range(1, 41)], resource_type=PHOTO),
        zenodo_hit(base, 11030003, "Peripheral blood film photographs, brightfield microscopy", {"id": "cc-zero"},
                   ["brightfield microscopy", "blood film"], "Brightfield microscopy photographs of blood films; "
                   "cells outlined by haematologists.", files=["films.zip", "README.txt"], resource_type=PHOTO,
                   sizes={"films.zip": 250_000_000}),
        zenodo_hit(base, 11030004, "Chest radiograph teaching photographs", {"id": "cc-by-4.0"},
                   ["chest radiograph", "teaching"], "Three photographs of chest radiographs on a light box.",
                   files=["light-box-1.jpg", "light-box-2.jpg", "light-box-3.jpg"], resource_type=PHOTO),
    ]


def _search_words(request: Request, key: str) -> str:
    return (request.arg(key) or "").casefold()


def _matches(record_text: str, query: str) -> bool:
    phrases = re.findall(r'"([^"]+)"', query) or [query]
    first = phrases[0].strip()
    return bool(first) and first in record_text


ZENODO_SEARCH_ARGS = {"q", "type", "subtype", "sort", "size", "page"}


def _resource_type_matches(hit: dict, request: Request) -> bool:
    """Zenodo's legacy `type`/`subtype` parameters: term filters on the record's resource type (`subtype` only
    with `type`, as `{type}-{subtype}`; zenodo-rdm site/zenodo_rdm/params.py LegacyTypeSubtypeParam)."""
    kind, subtype = request.arg("type"), request.arg("subtype")
    record = hit["metadata"]["resource_type"]
    return not kind or (record["type"] == kind and (not subtype or record.get("subtype") == subtype))


def zenodo_search(base: str, throttle_first: bool = True, records=zenodo_records) -> Callable[[Request], Reply]:
    """The `/api/records` handler: a 429 first (when asked), then `records(base)` filtered, paged, linked."""
    state = {"throttled": not throttle_first}

    def search(request: Request) -> Reply:
        if not state["throttled"]:
            state["throttled"] = True
            return Reply(429, "Request error 429: 30 per 1 minute",
                         {"Retry-After": "1", "Content-Type": "text/plain", "X-RateLimit-Limit": "30",
                          "X-RateLimit-Remaining": "0"})
        unknown = sorted(set(request.query) - ZENODO_SEARCH_ARGS)
        if unknown:  # stricter than Zenodo (which ignores them) so that a client sending a wrong shape fails here
            return Reply(400, {"status": 400, "message": "A validation error occurred.",
                               "errors": [{"field": name, "messages": ["Unknown field."]} for name in unknown]})
        if int(request.arg("size", "10")) > 25:
            return Reply(400, {"status": 400, "message": "A validation error occurred.", "errors": [{"field": "size",
                         "messages": ["Page size cannot be greater than 25. Please use authenticated requests to increase the limit to 100."]}]})
        query = _search_words(request, "q")
        hits = [h for h in records(base) if _resource_type_matches(h, request)
                and _matches(" ".join([h["metadata"]["title"], *h["metadata"]["keywords"],
                                      h["metadata"]["description"]]).casefold(), query)]
        page = int(request.arg("page", "1"))
        chunk = hits[(page - 1) * ZENODO_PAGE: page * ZENODO_PAGE]
        args = "&".join(f"{k}={v[0]}" for k, v in sorted(request.query.items()) if k != "page")
        links = {"self": f"{base}/api/records?page={page}&{args}"}
        if page * ZENODO_PAGE < len(hits):
            links["next"] = f"{base}/api/records?page={page + 1}&{args}"
        if page > 1:
            links["prev"] = f"{base}/api/records?page={page - 1}&{args}"
        return Reply(200, {"hits": {"hits": chunk, "total": len(hits)}, "aggregations": {}, "links": links},
                     {"X-RateLimit-Limit": "133", "X-RateLimit-Remaining": "120", "X-RateLimit-Reset": "0",
                      "ETag": '"abc"'})

    return search


def install_zenodo(server: LoopbackServer, throttle_first: bool = True) -> None:
    base = server.url

    def record(request: Request) -> Reply:
        record_id = int(request.path.rsplit("/", 1)[1])
        for hit in zenodo_records(base):
            if hit["id"] == record_id:
                return Reply(200, hit)
        return Reply(404, {"status": 404, "message": "The persistent identifier does not exist."})

    server.add("GET", "/api/records", zenodo_search(base, throttle_first))
    server.add("GET", r"^/api/records/\d+$", record)


def hf_item(repo: str, card: dict | None, tags: list[str], description: str = "", **extra: object) -> dict:
    item = {"_id": "66a1b2c3d4e5f60718293a4b", "id": repo, "author": repo.split("/")[0],
            "sha": "0123456789abcdef0123456789abcdef01234567", "lastModified": "2025-03-04T13:55:27.000Z",
            "private": False, "gated": False, "disabled": False, "downloads": 1234, "likes": 56, "trendingScore": 0,
            "tags": tags, "createdAt": "2024-01-10T09:00:00.000Z", "key": "", "description": description,
            "siblings": [{"rfilename": ".gitattributes"}, {"rfilename": "README.md"},
                         {"rfilename": "data/train-00000-of-00001.parquet"}],
            "citation": None, "paperswithcode_id": None, "resourceGroup": None, "newUnknownField": {"x": 1}}
    if card is not None:
        item["cardData"] = card
    item.update(extra)
    return item


def hf_items() -> list[dict]:
    return [
        hf_item("someorg/chest-xray-demo", {"license": "cc-by-4.0", "task_categories": ["image-classification"],
                "annotations_creators": ["expert-generated"], "pretty_name": "Chest X-ray demo", "tags": ["medical", "radiology"]},
                ["task_categories:image-classification", "modality:image", "license:cc-by-4.0", "size_categories:1K<n<10K",
                 "format:imagefolder", "library:datasets", "region:us"],
                "Frontal chest radiographs with radiologist labels."),
        hf_item("someorg/chest-xray-vqa-instruct", {"license": "mit", "source_datasets": ["mimic-cxr"],
                "annotations_creators": ["expert-generated"], "task_categories": ["visual-question-answering"]},
                ["modality:image", "license:mit", "task_categories:visual-question-answering"],
                "Chest x-ray instruction conversations for VLM training."),
        hf_item("labs/chest-xray-llm-labels", {"license": "apache-2.0", "annotations_creators": ["machine-generated"]},
                ["modality:image", "license:apache-2.0"], "Chest x-ray images labelled by a model."),
        hf_item("labs/chest-xray-mixed-licence", {"license": "other", "annotations_creators": ["expert-generated"]},
                ["modality:image", "license:cc-by-4.0"], "Chest x-ray images, licence in the card says other."),
        hf_item("derm/blood-smear-brightfield", None, ["modality:image", "license:cc0-1.0"],
                "Brightfield microscopy blood smears.", paperswithcode_id="blood-cell-smears"),
    ]


def install_huggingface(server: LoopbackServer) -> None:
    base = server.url

    def listing(request: Request) -> Reply:
        words = _search_words(request, "search")
        hits = [item for item in hf_items()
                if words and all(w in (item["id"] + " " + item["description"]).casefold().replace("-", " ")
                                 for w in words.split())]
        cursor = int(request.arg("cursor", "0"))
        chunk = hits[cursor: cursor + 2]
        headers = {"Content-Type": "application/json"}
        if cursor + 2 < len(hits):
            query = "&".join(f"{k}={v}" for k, values in sorted(request.query.items()) if k != "cursor" for v in values)
            headers["Link"] = f'<{base}/api/datasets?{query}&cursor={cursor + 2}>; rel="next"'
        return Reply(200, chunk, headers)

    def one(request: Request) -> Reply:
        repo = request.path.removeprefix("/api/datasets/")
        extra = {"derm/isic-demo": hf_item("derm/isic-demo", {"license": "cc-by-nc-4.0",
                 "annotations_creators": ["expert-generated"], "pretty_name": "ISIC dermoscopy demo"},
                 ["modality:image", "license:cc-by-nc-4.0"], "Dermoscopy images with lesion masks.")}
        item = next((i for i in hf_items() if i["id"] == repo), None) or extra.get(repo)
        if item is None:
            return Reply(404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})
        return Reply(200, item)

    server.add("GET", "/api/datasets", listing)
    server.add("GET", r"^/api/datasets/[\w.-]+/[\w.-]+$", one)


def kaggle_item(ref: str, title: str, licence: str, tags: list[str], subtitle: str = "") -> dict:
    return {"id": abs(hash(ref)) % 10**7, "ref": ref, "subtitle": subtitle, "creatorName": "Some User",
            "creatorUrl": ref.split("/")[0], "totalBytes": 1237000000, "url": f"https://www.kaggle.com/datasets/{ref}",
            "lastUpdated": "2024-05-02T10:11:12.123Z", "downloadCount": 4567, "isPrivate": False, "isFeatured": False,
            "licenseName": licence, "description": "", "ownerName": "Some User", "ownerRef": ref.split("/")[0],
            "kernelCount": 12, "title": title, "topicCount": 1, "viewCount": 89012, "voteCount": 321,
            "currentVersionNumber": 2, "usabilityRating": 0.875,
            "tags": [{"ref": t, "name": t, "description": "", "fullPath": f"subject > {t}", "competitionCount": 0,
                      "datasetCount": 0, "scriptCount": 0, "totalCount": 0} for t in tags],
            "files": [], "versions": [], "thumbnailImageUrl": "https://storage.googleapis.com/kaggle-datasets-images/1/thumb.png"}


def kaggle_items() -> list[dict]:
    return [
        kaggle_item("someuser/chest-xray-pneumonia-demo", "Chest X-Ray Pneumonia (demo)", "CC0: Public Domain",
                    ["medicine", "image"], "Frontal CXR, pneumonia vs normal"),
        kaggle_item("someuser/chest-radiograph-lines-tubes", "Chest radiograph lines and tubes detection", "CC BY 4.0",
                    ["medicine", "computer vision"], "catheter boxes"),
        kaggle_item("other/chest-xray-report-costs", "Chest X-ray billing codes", "Unknown", ["tabular", "finance"],
                    "costs per study"),
        kaggle_item("micro/blood-smear-brightfield", "Blood smear brightfield microscopy images with cell annotations",
                    "Attribution 4.0 International (CC BY 4.0)", ["biology", "image"], "microscopy of blood smears"),
    ]


def install_kaggle(server: LoopbackServer) -> None:
    def listing(request: Request) -> Reply:
        body = request.json() or {}
        words = str(body.get("search", "")).casefold()
        hits = [item for item in kaggle_items()
                if words and words.split()[0] in (item["title"] + " " + item["subtitle"]).casefold()]
        page = int(body.get("page") or 1)
        chunk = hits[(page - 1) * 2: page * 2]
        token = f"CAEQ{page}" if page * 2 < len(hits) else ""
        return Reply(200, {"datasets": copy.deepcopy(chunk), "nextPageToken": token, "totalResults": len(hits)})

    server.add("POST", "/v1/datasets.DatasetApiService/ListDatasets", listing)


def install_all(server: LoopbackServer, monkeypatch, throttle_first: bool = True) -> None:
    """Every source on one loopback server, pointed at through the user's own variables."""
    install_zenodo(server, throttle_first)
    install_huggingface(server)
    install_kaggle(server)
    monkeypatch.setenv("MMBU_ZENODO_URL", server.url)
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("MMBU_KAGGLE_URL", server.url)
    monkeypatch.setenv("MMBU_PWC_INDEX", str(PWC_INDEX))

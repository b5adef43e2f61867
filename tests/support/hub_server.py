"""A loopback Hugging Face Hub for dataset repositories: what huggingface_hub 2.x calls to create a repository and
a branch, commit a folder (YAML check, preupload, the LFS batch API with basic transfers, the NDJSON commit) and
download a snapshot of a commit (repo info at a commit or the default branch, tree listing, `resolve`). Commits are
kept in memory, so a test can push a release and evaluate it back from `hf://owner/name@<commit>`.

The Xet transfer path needs Hugging Face's CAS service and is not emulated: tests that upload set huggingface_hub's
own switch `HF_HUB_DISABLE_XET`, and the client falls back to LFS, as it does without the `hf_xet` package.
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass, field

from support.loopback import LoopbackServer, Reply, Request

LFS_SUFFIXES = (".parquet", ".png", ".arrow")  # what the Hub's default .gitattributes sends through LFS
REPO = r"(?P<repo>[^/]+/[^/]+)"


@dataclass
class Repository:
    private: bool
    branches: dict[str, str] = field(default_factory=dict)  # branch -> commit sha
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)  # commit sha -> {path: bytes}
    messages: dict[str, str] = field(default_factory=dict)  # commit sha -> its summary


class LoopbackHub:
    """Start with `with LoopbackHub(token="hf_...") as hub:`; point HF_ENDPOINT at `hub.url`."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.server = LoopbackServer()
        self.repos: dict[str, Repository] = {}
        self.lfs: dict[str, bytes] = {}  # sha256 -> bytes
        routes = [
            ("POST", "/api/repos/create", self._create_repo),
            ("POST", "/api/validate-yaml", self._validate_yaml),
            ("POST", rf"^/api/datasets/{REPO}/branch/(?P<branch>[^/]+)$", self._create_branch),
            ("POST", rf"^/api/datasets/{REPO}/preupload/(?P<rev>[^/]+)$", self._preupload),
            ("POST", rf"^/datasets/{REPO}\.git/info/lfs/objects/batch$", self._lfs_batch),
            ("POST", "/lfs-verify", self._lfs_verify),
            ("POST", rf"^/api/datasets/{REPO}/commit/(?P<rev>[^/]+)$", self._commit),
            ("GET", rf"^/api/datasets/{REPO}$", self._default_branch_info),
            ("GET", rf"^/api/datasets/{REPO}/revision/(?P<rev>[^/]+)$", self._repo_info),
            ("GET", rf"^/api/datasets/{REPO}/tree/(?P<rev>[^/]+)", self._tree),
            ("GET", rf"^/datasets/{REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)$", self._resolve),
            ("HEAD", rf"^/datasets/{REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)$", self._resolve),
        ]
        for method, path, handler in routes:
            self.server.add(method, path, self._guarded(path, handler))
        # the batch API's upload href is a signed URL, as the Hub's storage hands out: no Authorization header
        self.server.add("PUT", r"^/lfs-upload/(?P<oid>[0-9a-f]{64})$", self._lfs_upload)

    @property
    def url(self) -> str:
        return self.server.url

    def __enter__(self) -> LoopbackHub:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()

    def files(self, repo: str, revision: str = "main") -> dict[str, bytes]:
        repository = self.repos[repo]
        return repository.commits[repository.branches.get(revision, revision)]

    # -- plumbing -----------------------------------------------------------------------------
    def _guarded(self, pattern: str, handler):
        def serve(request: Request) -> Reply:
            match = re.match(pattern, request.path) if pattern.startswith("^") else None
            groups = match.groupdict() if match else {}
            reads = request.method in ("GET", "HEAD")
            private = groups.get("repo") in self.repos and self.repos[groups["repo"]].private
            if (not reads or private) and request.headers.get("authorization") != f"Bearer {self.token}":
                return Reply(401, {"error": "Invalid credentials in Authorization header"},
                             {"X-Error-Message": "Invalid credentials in Authorization header"})
            if "repo" in groups and groups["repo"] not in self.repos and not request.path.startswith("/api/repos"):
                return Reply(404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound",
                                                                      "X-Error-Message": "Repository not found"})
            return handler(request, **groups)

        return serve

    def _sha(self, repo: str, rev: str) -> str | None:
        repository = self.repos[repo]
        return repository.branches.get(rev) or (rev if rev in repository.commits else None)

    # -- writing -------------------------------------------------------------------------------
    def _create_repo(self, request: Request) -> Reply:
        body = request.json()
        repo = f"{body['organization']}/{body['name']}"
        if body.get("type") != "dataset":
            return Reply(400, {"error": "this loopback Hub holds dataset repositories only"})
        if repo in self.repos:
            return Reply(409, {"error": "You already created this dataset repo", "url": f"{self.url}/datasets/{repo}"})
        initial = hashlib.sha1(f"initial {repo}".encode()).hexdigest()
        attributes = b"*.parquet filter=lfs diff=lfs merge=lfs -text\n"
        self.repos[repo] = Repository(private=body.get("visibility") == "private" or bool(body.get("private")),
                                      branches={"main": initial}, commits={initial: {".gitattributes": attributes}},
                                      messages={initial: "initial commit"})
        return Reply(200, {"url": f"{self.url}/datasets/{repo}", "name": repo, "id": repo})

    def _create_branch(self, request: Request, repo: str, branch: str) -> Reply:
        repository = self.repos[repo]
        if branch in repository.branches:
            return Reply(409, {"error": f"Reference already exists: refs/heads/{branch}"})
        repository.branches[branch] = repository.branches["main"]
        return Reply(200, {})

    def _validate_yaml(self, request: Request) -> Reply:
        content = request.json()["content"]
        if not content.startswith("---\n") or "\n---" not in content[4:]:
            return Reply(400, {"errors": [{"message": "README.md has no YAML metadata block"}], "warnings": []})
        return Reply(200, {"errors": [], "warnings": []})

    def _preupload(self, request: Request, repo: str, rev: str) -> Reply:
        files = [{"path": item["path"], "shouldIgnore": False, "oid": None,
                  "uploadMode": "lfs" if item["path"].endswith(LFS_SUFFIXES) else "regular"}
                 for item in request.json()["files"]]
        return Reply(200, {"files": files, "commitOid": self._sha(repo, rev)})

    def _lfs_batch(self, request: Request, repo: str) -> Reply:
        body = request.json()
        if "basic" not in body.get("transfers", ["basic"]) or body.get("hash_algo", "sha256") != "sha256":
            return Reply(422, {"message": "only basic transfers of sha256 objects"})
        objects = []
        for item in body["objects"]:
            answer = {"oid": item["oid"], "size": item["size"], "authenticated": True}
            if item["oid"] not in self.lfs:
                answer["actions"] = {"upload": {"href": f"{self.url}/lfs-upload/{item['oid']}?signature="
                                                        f"{self._signature(item['oid'])}"},
                                     "verify": {"href": f"{self.url}/lfs-verify"}}
            objects.append(answer)
        return Reply(200, {"transfer": "basic", "objects": objects}, {"Content-Type": "application/vnd.git-lfs+json"})

    def _signature(self, oid: str) -> str:
        return hashlib.sha256(f"{self.token}:{oid}".encode()).hexdigest()[:32]

    def _lfs_upload(self, request: Request) -> Reply:
        oid = request.path.rsplit("/", 1)[1]
        if request.arg("signature") != self._signature(oid):
            return Reply(403, b"<Error><Code>SignatureDoesNotMatch</Code></Error>")
        if hashlib.sha256(request.body).hexdigest() != oid:
            return Reply(400, {"error": "the uploaded bytes do not match the oid"})
        self.lfs[oid] = request.body
        return Reply(200, b"")

    def _lfs_verify(self, request: Request) -> Reply:
        body = request.json()
        stored = self.lfs.get(body["oid"])
        return Reply(200, {}) if stored is not None and len(stored) == body["size"] else Reply(404, {"error": "missing"})

    def _commit(self, request: Request, repo: str, rev: str) -> Reply:
        repository = self.repos[repo]
        parent = self._sha(repo, rev)
        if parent is None:
            return Reply(404, {"error": f"Invalid rev id: {rev}"}, {"X-Error-Code": "RevisionNotFound"})
        tree = dict(repository.commits[parent])
        summary = ""
        for line in request.body.splitlines():
            item = json.loads(line)
            value = item["value"]
            if item["key"] == "header":
                summary = value["summary"]
            elif item["key"] == "file":
                tree[value["path"]] = base64.b64decode(value["content"])
            elif item["key"] == "lfsFile":
                if value["oid"] not in self.lfs:
                    return Reply(422, {"error": f"LFS object {value['oid']} was never uploaded"})
                tree[value["path"]] = self.lfs[value["oid"]]
            elif item["key"] == "deletedFile":
                tree.pop(value["path"], None)
        sha = hashlib.sha1(json.dumps([parent, sorted((p, hashlib.sha256(b).hexdigest()) for p, b in tree.items())])
                           .encode()).hexdigest()
        repository.commits[sha], repository.messages[sha] = tree, summary
        repository.branches[rev] = sha
        return Reply(200, {"commitUrl": f"{self.url}/datasets/{repo}/commit/{sha}", "commitOid": sha,
                           "success": True, "pullRequestUrl": None})

    # -- reading -------------------------------------------------------------------------------
    def _repo_info(self, request: Request, repo: str, rev: str) -> Reply:
        sha = self._sha(repo, rev)
        if sha is None:
            return Reply(404, {"error": f"Invalid rev id: {rev}"}, {"X-Error-Code": "RevisionNotFound"})
        return Reply(200, {"_id": "66a1b2c3d4e5f60718293a4b", "id": repo, "sha": sha, "gated": False,
                           "private": self.repos[repo].private,
                           "siblings": [{"rfilename": path} for path in sorted(self.repos[repo].commits[sha])]})

    def _default_branch_info(self, request: Request, repo: str) -> Reply:
        """`GET /api/datasets/<repo>`: the repo info at its default branch (what `HfApi.dataset_info` asks)."""
        return self._repo_info(request, repo, "main")

    def _tree(self, request: Request, repo: str, rev: str) -> Reply:
        sha = self._sha(repo, rev)
        if sha is None:
            return Reply(404, {"error": f"Invalid rev id: {rev}"}, {"X-Error-Code": "RevisionNotFound"})
        return Reply(200, [{"type": "file", "oid": hashlib.sha1(data).hexdigest(), "size": len(data), "path": path}
                           for path, data in sorted(self.repos[repo].commits[sha].items())])

    def _resolve(self, request: Request, repo: str, rev: str, path: str) -> Reply:
        sha = self._sha(repo, rev)
        files = self.repos[repo].commits.get(sha or "", {})
        if path not in files:
            return Reply(404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"})
        data = files[path]
        return Reply(200, data, {"X-Repo-Commit": sha, "ETag": f'"{hashlib.sha1(data).hexdigest()}"',
                                 "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"})

"""The patterns an audit of the catalogue's evidence found, as checks that hunt them through every manifest.

An audit traced 108 facts of 25 manifests to their sources. Each weakness it found is a shape that text alone can
show, so each is a check here, returning one sentence per finding:

- `count_rests_on_items`: a sample count taken from a host's figure of items or files while the same evidence lists a
  different number of images (african_fetal_planes: "456 items" against "450 of them images");
- `annex_branch_citations`: a file that lives only on a git-annex branch (`remote.log`, `uuid.log`, ...) cited at a
  commit of the work tree, which other citations of the catalogue show holds the dataset's files (mr_art's
  `remote.log`): the file cannot exist at that commit;
- `code_licence_for_data`: a licence quoted from a sentence about a code repository ("This project is licensed ...")
  standing for a dataset hosted elsewhere (cytodark0);
- `unquoted_file_keys`: a file key of the source (Zenodo or Kaggle `files`) that no host or layout citation quotes,
  so it was read nowhere a reviewer can follow (medimeta_fundus' `fundus.zip`, taken from an unrelated script).
"""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable

from mmbu.curation.manifest.evidence import FACTS, REPO_REF
from mmbu.curation.manifest.model import DatasetManifest

_NUMBER = r"(\d{1,3}(?:,\d{3})+|\d+)"
_CONTAINERS = re.compile(_NUMBER + r"\s+(?:items|files|entries|records)\b")
_IMAGES = re.compile(_NUMBER + r"\s+(?:[A-Za-z-]+\s+){0,2}?(?:images?|PNGs?|JPE?Gs?|TIFF?s?|photographs|radiographs|"
                               r"scans|volumes|slides|micrographs)\b")
_IMAGE_FILE = re.compile(r"\.(?:png|jpe?g|tiff?|bmp|dcm|nii|svs)\b", re.I)
# files only a git-annex branch holds: its logs at the top, and the per-key logs under hashed folders
_ANNEX_ONLY = re.compile(r"^(?:(?:remote|uuid|trust|group|numcopies|preferred-content|required-content|schedule|"
                         r"config|difference|multicast|activity|migrate)\.log|[0-9a-f]{3}/[0-9a-f]{3}/.+\.log(?:\.web|"
                         r"\.met|\.rmet|\.cid|\.cnk)?)$")
_ABOUT_CODE = re.compile(r"\b(?:this|the)\s+(?:project|code|codebase|repository|repo|software|library|package|"
                         r"toolbox|tool|implementation|source code)\b", re.I)
_ABOUT_DATA = re.compile(r"\b(?:data|dataset|datasets|images)\b", re.I)


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _texts(citations: Iterable) -> list[str]:
    return [" ".join(filter(None, (c.quote, c.note))) for c in citations]


def count_rests_on_items(manifest: DatasetManifest) -> list[str]:
    """The sample count is a figure of items or files (not of images) and the evidence lists another image count."""
    evidence = manifest.evidence
    count = evidence.samples.count if evidence else None
    if count is None:
        return []
    counted = _texts(evidence.samples.cites)
    everything = counted + [t for fact in FACTS[:3] for t in _texts(evidence.citations(fact))]
    on_items = any(_number(found.group(1)) == count and not _IMAGE_FILE.search(text)
                   for text in counted for found in _CONTAINERS.finditer(text))
    images = {_number(found.group(1)) for text in everything for found in _IMAGES.finditer(text)}
    if not on_items or count in images or not images:
        return []
    return [f"{manifest.id}: evidence.samples.count {count} is a figure of items or files, while the evidence lists "
            f"{', '.join(map(str, sorted(images)))} images; count the images"]


def annex_branch_citations(manifests: Iterable[DatasetManifest]) -> list[str]:
    """Citations of git-annex-branch files at a commit the catalogue also cites for work-tree files."""
    cited: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for manifest in manifests:
        for fact in FACTS:
            for citation in manifest.evidence.citations(fact) if manifest.evidence else []:
                if citation.source and (found := REPO_REF.match(citation.source)):
                    cited[(found["repo"].lower(), found["commit"])][found["path"]].add(manifest.id)
    findings = []
    for (repo, commit), paths in sorted(cited.items()):
        annex = sorted(path for path in paths if _ANNEX_ONLY.match(path))
        tree = sorted(path for path in paths if not _ANNEX_ONLY.match(path))
        for path in annex if tree else []:
            for dataset in sorted(paths[path]):
                findings.append(f"{dataset}: {repo}@{commit[:12]}:{path} lives on the git-annex branch, but "
                                f"{commit[:12]} is a work-tree commit (it holds {tree[0]}); cite the git-annex "
                                "branch's commit")
    return findings


def code_licence_for_data(manifest: DatasetManifest) -> list[str]:
    """A licence citation whose quote is about a code project, not about the data, for data hosted elsewhere."""
    findings = []
    source_text = manifest.source.model_dump_json()
    for citation in manifest.evidence.licence if manifest.evidence else []:
        quote = citation.quote or ""
        repo = REPO_REF.match(citation.source or "")
        hosted_there = repo is not None and repo["repo"].lower() in source_text.lower()
        if _ABOUT_CODE.search(quote) and not _ABOUT_DATA.search(quote) and not hosted_there:
            findings.append(f"{manifest.id}: the licence quote {quote[:60]!r} speaks of a code project, and the data "
                            f"comes from {manifest.source.kind}; cite the data record's licence")
    return findings


def unquoted_file_keys(manifest: DatasetManifest) -> list[str]:
    """File keys of a Zenodo, figshare or Kaggle source that no host or layout citation quotes (or names in its source)."""
    keys = getattr(manifest.source, "files", None) if manifest.source.kind in ("zenodo", "figshare", "kaggle") else None
    if not keys or not manifest.evidence:
        return []
    cited = " ".join(" ".join(filter(None, (c.quote, c.source)))
                     for fact in ("host", "layout") for c in manifest.evidence.citations(fact))
    return [f"{manifest.id}: source file {key!r} is quoted by no host or layout citation; quote where it was read"
            for key in keys if key not in cited]


PER_MANIFEST = {"count_rests_on_items": count_rests_on_items, "code_licence_for_data": code_licence_for_data,
                "unquoted_file_keys": unquoted_file_keys}


def audit_findings(manifests: list[DatasetManifest]) -> dict[str, list[str]]:
    """Check name -> one sentence per finding, over the whole catalogue."""
    found = {name: [line for manifest in manifests for line in check(manifest)] for name, check in PER_MANIFEST.items()}
    found["annex_branch_citations"] = annex_branch_citations(manifests)
    return found

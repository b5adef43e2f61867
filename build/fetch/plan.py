"""The fetch plan: what a build will download, from which hosts, how much, and whether the hosts answer.

`plan_fetch` looks at every manifest before anything is downloaded:
 1. already fetched (the completion record matches the manifest and the lock): nothing to do, no request;
 2. in the mirror, or a local source: sizes read from disk, no request;
 3. otherwise the host's metadata API is asked for names and sizes (Zenodo record, figshare article version, Hugging
    Face tree listing, Kaggle `ListDatasetFiles`, a one-byte ranged GET for plain URLs) unless the lock already pins them and the
    host has answered for another dataset. Sizes nobody states are `None` ("unknown"), never guessed.

Hosts are probed concurrently (one thread per host, so each host still sees one request at a time) through a
session with few attempts and short timeouts: a host that does not answer marks every dataset on it
`unreachable` with one sentence, and no further request goes to it. Offline, the plan is ready in seconds.
"""
from __future__ import annotations

import shutil
import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from mmbu.build.fetch.archives import ARCHIVE_SUFFIXES
from mmbu.build.fetch.fetcher import is_complete, source_identity
from mmbu.build.fetch.lockfile import LockFile
from mmbu.build.fetch.model import FetchError
from mmbu.build.fetch.sources import REMOTE_FILES, RemoteContext, RemoteFile
from mmbu.build.fetch.sources.context import tree_files
from mmbu.build.fetch.sources.figshare import figshare_base_url
from mmbu.build.fetch.sources.huggingface import huggingface_base_url
from mmbu.build.fetch.sources.kaggle import kaggle_base_url
from mmbu.build.fetch.sources.local import local_files
from mmbu.build.fetch.sources.zenodo import zenodo_base_url
from mmbu.curation.http import BlockedError, HostPolicy, HttpError, PoliteSession, TransportError
from mmbu.curation.manifest import DatasetManifest, ManifestError, load_manifest

PlanState = Literal["fetched", "mirror", "local", "to_fetch", "unreachable", "invalid"]
# Probing: a dead host must cost seconds, not the minutes of backoff a download is worth.
PROBE_LIMITS = {"max_attempts": 2, "connect_timeout": 5.0, "read_timeout": 30.0, "backoff_max": 1.0,
                "max_server_wait": 30.0}


class PlannedFile(BaseModel):
    name: str
    size: int | None = Field(description="Bytes to download; None when neither the host nor the lock states it.")
    basis: str = Field(description="Who stated the size: zenodo, figshare, huggingface, kaggle, content-range, "
                                   "manifests.lock, disk.")
    uncompressed: int | None = None


class DatasetPlan(BaseModel):
    dataset_id: str
    manifest: str
    source: str | None = None
    hosts: list[str] = Field(default_factory=list)
    state: PlanState
    files: list[PlannedFile] = Field(default_factory=list)
    partial_bytes: int = Field(0, description="Bytes of interrupted downloads in downloads/<id>/ (resumed).")
    note: str | None = Field(None, description="Why sizes are unknown (the host's answer), when they are.")
    error: str | None = Field(None, description="Why this dataset cannot be fetched now (unreachable, invalid).")

    @property
    def blocked(self) -> bool:
        return self.state in ("unreachable", "invalid")

    @property
    def known_bytes(self) -> int:
        return sum(f.size for f in self.files if f.size is not None)

    @property
    def unknown_files(self) -> int:
        return sum(f.size is None for f in self.files) + (1 if self.state == "to_fetch" and not self.files else 0)

    @property
    def download_bytes(self) -> int:
        """Known bytes still to come over the network (what interrupted downloads already hold is not counted)."""
        return max(0, self.known_bytes - self.partial_bytes) if self.state == "to_fetch" else 0

    @property
    def disk_bytes(self) -> int:
        """Known disk room the fetch needs: archives lie beside their extracted files until removed."""
        if self.state not in ("to_fetch", "mirror", "local"):
            return 0
        total = 0
        for planned in self.files:
            size = planned.size if planned.size is not None else planned.uncompressed or 0
            total += 2 * size if planned.name.lower().endswith(ARCHIVE_SUFFIXES) else size
        return max(0, total - self.partial_bytes)


class FetchPlan(BaseModel):
    data_dir: str
    datasets: list[DatasetPlan]
    free_bytes: int | None

    def by_id(self) -> dict[str, DatasetPlan]:
        return {d.dataset_id: d for d in self.datasets}

    @property
    def blocked(self) -> list[DatasetPlan]:
        return [d for d in self.datasets if d.blocked]

    @property
    def disk_bytes(self) -> int:
        return sum(d.disk_bytes for d in self.datasets)


def probing_session(policies: dict[str, HostPolicy] | None = None,
                    default_policy: HostPolicy | None = None) -> PoliteSession:
    """A session like the fetch's (same rate caps; without policies, those `$MMBU_HTTP_POLICIES` names) but with few
    attempts and short timeouts."""
    from mmbu.curation.http import DEFAULT_POLICIES, DEFAULT_POLICY, configured_policies

    if policies is None and default_policy is None:
        policies, default_policy = configured_policies()

    def quick(policy: HostPolicy) -> HostPolicy:
        return policy.model_copy(update={k: min(getattr(policy, k), v) for k, v in PROBE_LIMITS.items()})

    base = DEFAULT_POLICIES if policies is None else policies
    return PoliteSession({host: quick(p) for host, p in base.items()},
                         default_policy=quick(default_policy or DEFAULT_POLICY))


def source_hosts(manifest: DatasetManifest) -> list[str]:
    """The hosts a manifest's source downloads from ("local" for files on disk)."""
    source = manifest.source
    if source.kind == "zenodo":
        return [urlsplit(zenodo_base_url()).netloc]
    if source.kind == "figshare":  # its API host: the files' own host is known only once the API has answered
        return [urlsplit(figshare_base_url()).netloc]
    if source.kind == "huggingface":
        return [urlsplit(huggingface_base_url()).netloc]
    if source.kind == "kaggle":
        return [urlsplit(kaggle_base_url()).netloc]
    if source.kind == "url":
        return list(dict.fromkeys(urlsplit(f.url).netloc for f in source.files))
    return ["local"]


def partial_bytes(data_dir: Path, dataset_id: str) -> int:
    folder = Path(data_dir) / "downloads" / dataset_id
    return sum(p.stat().st_size for p in folder.rglob("*.part") if p.is_file()) if folder.is_dir() else 0


def free_bytes(data_dir: Path) -> int | None:
    """Free space on the file system that holds (or will hold) `data_dir`."""
    for folder in [Path(data_dir).resolve(), *Path(data_dir).resolve().parents]:
        if folder.exists():
            return shutil.disk_usage(folder).free
    return None


class _HostBook:
    """Which hosts answered and which did not, shared by the probing threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._down: dict[str, str] = {}
        self._up: set[str] = set()

    def down(self, hosts: Iterable[str]) -> str | None:
        with self._lock:
            return next((f"host {h} is unreachable ({self._down[h]})" for h in hosts if h in self._down), None)

    def all_up(self, hosts: Iterable[str]) -> bool:
        with self._lock:
            return all(h in self._up for h in hosts)

    def mark(self, hosts: Iterable[str], error: HttpError | None = None) -> None:
        with self._lock:
            for host in hosts:
                if error is None:
                    self._up.add(host)
                else:
                    self._down.setdefault(host, transport_cause(error))


TRANSPORT_CAUSES = (  # what requests/urllib3 bury in a long message -> the sentence a user needs
    (("NameResolutionError", "Failed to resolve", "Name or service not known", "name resolution"),
     "its name does not resolve: no network, or no DNS"),
    (("Connection refused",), "connection refused"),
    (("Network is unreachable", "No route to host"), "no route to it: no network"),
    (("timed out", "Timeout"), "no answer in time"),
)


def transport_cause(error: HttpError) -> str:
    """A short cause for a host that did not answer (the full message stays in the log)."""
    if isinstance(error, BlockedError):
        return error.detail
    for markers, cause in TRANSPORT_CAUSES:
        if any(marker in error.detail for marker in markers):
            return cause
    return " ".join(error.detail.split())[:160]


def plan_fetch(manifest_paths: Iterable[Path], data_dir: Path, *, mirror: Path | None = None,
               lock: LockFile | None = None, session: PoliteSession | None = None,
               repo_root: Path | None = None, manifests: Mapping[Path, DatasetManifest] | None = None) -> FetchPlan:
    """The plan for fetching these manifests into `data_dir/raw/` (see the module docstring). Never raises for
    a dataset problem; `session` defaults to `probing_session()`. `manifests`: files already parsed (by path),
    which are not read again."""
    session = session or probing_session()
    repo_root = Path(repo_root or Path.cwd())
    plans: dict[int, DatasetPlan] = {}
    remote: dict[str, list[tuple[int, DatasetManifest, Path]]] = defaultdict(list)
    for index, path in enumerate(manifest_paths):
        try:
            manifest = (manifests or {}).get(path) or load_manifest(path)
        except ManifestError as exc:
            plans[index] = DatasetPlan(dataset_id=Path(path).stem, manifest=str(path), state="invalid",
                                       error=" ".join(str(exc).split()))
            continue
        plan = _plan_without_network(manifest, Path(path), data_dir, mirror, lock, repo_root)
        if plan is not None:
            plans[index] = plan
        else:
            remote[source_hosts(manifest)[0]].append((index, manifest, Path(path)))

    book = _HostBook()
    context = RemoteContext(session=session, licence="", repo_root=repo_root)

    def probe_host(group: list[tuple[int, DatasetManifest, Path]]) -> list[tuple[int, DatasetPlan]]:
        return [(index, _plan_remote(manifest, path, data_dir, lock, context, book))
                for index, manifest, path in group]

    if remote:
        with ThreadPoolExecutor(max_workers=min(8, len(remote)), thread_name_prefix="plan") as pool:
            for done in pool.map(probe_host, remote.values()):
                plans.update(done)
    return FetchPlan(data_dir=str(data_dir), datasets=[plans[i] for i in sorted(plans)],
                     free_bytes=free_bytes(data_dir))


def _plan_without_network(manifest: DatasetManifest, path: Path, data_dir: Path, mirror: Path | None,
                          lock: LockFile | None, repo_root: Path) -> DatasetPlan | None:
    """The plan of a dataset that needs no request (fetched, mirrored, local), or None."""
    identity = source_identity(manifest)
    pins = lock.pins_for(manifest.id, identity) if lock else {}
    common = {"dataset_id": manifest.id, "manifest": str(path), "source": manifest.source.kind}
    resolved = lock.resolved_for(manifest.id, identity) if lock else {}
    record = is_complete(Path(data_dir) / "raw" / manifest.id, manifest, pins, resolved)
    if record is not None:
        files = [PlannedFile(name=f.name, size=f.size, basis="disk") for f in record.files]
        return DatasetPlan(**common, hosts=[], state="fetched", files=files)
    mirror_dir = Path(mirror) / manifest.id if mirror else None
    if mirror_dir is not None and mirror_dir.is_dir():
        try:
            names = tree_files(mirror_dir)
        except FetchError as exc:
            return DatasetPlan(**common, state="invalid", error=str(exc))
        files = [PlannedFile(name=n, size=(mirror_dir / n).stat().st_size, basis="disk") for n in names]
        return DatasetPlan(**common, hosts=["mirror"], state="mirror", files=files)
    if manifest.source.kind == "local":
        try:
            folder, names = local_files(manifest.source, repo_root)
        except FetchError as exc:
            return DatasetPlan(**common, hosts=["local"], state="invalid", error=str(exc))
        files = [PlannedFile(name=n, size=(folder / n).stat().st_size, basis="disk") for n in names]
        return DatasetPlan(**common, hosts=["local"], state="local", files=files)
    return None


def _plan_remote(manifest: DatasetManifest, path: Path, data_dir: Path, lock: LockFile | None,
                 context: RemoteContext, book: _HostBook) -> DatasetPlan:
    hosts = source_hosts(manifest)
    pins = lock.pins_for(manifest.id, source_identity(manifest)) if lock else {}
    pinned = [PlannedFile(name=n, size=p.size, basis="manifests.lock") for n, p in sorted(pins.items())]
    plan = DatasetPlan(dataset_id=manifest.id, manifest=str(path), source=manifest.source.kind, hosts=hosts,
                       state="to_fetch", files=pinned, partial_bytes=partial_bytes(data_dir, manifest.id))
    if (down := book.down(hosts)) is not None:
        return plan.model_copy(update={"state": "unreachable", "error": down})
    if pinned and book.all_up(hosts):
        return plan  # the lock knows every size and the host has answered for another dataset
    resolved = lock.resolved_for(manifest.id, source_identity(manifest)) if lock else {}
    ask = RemoteContext(session=context.session, licence=manifest.license, repo_root=context.repo_root,
                        pinned=resolved)
    try:
        found = REMOTE_FILES[manifest.source.kind](manifest.source, ask)
    except (TransportError, BlockedError) as exc:
        failed = urlsplit(exc.url).netloc
        book.mark([failed], exc)
        return plan.model_copy(update={"state": "unreachable", "error": book.down([failed])})
    except FetchError as exc:  # raised before any request (Kaggle's missing credentials): is the host there at all?
        if (down := _probe_hosts(hosts, context, book)) is not None:
            return plan.model_copy(update={"state": "unreachable", "error": down})
        return plan.model_copy(update={"note": f"sizes unknown: {exc}"})
    except HttpError as exc:  # the host answered: the fetch will say more; sizes stay unknown
        book.mark(hosts)
        return plan.model_copy(update={"note": f"sizes unknown: {exc}"})
    book.mark(hosts)
    if pinned:
        return plan  # exact sizes of the very files pinned
    return plan.model_copy(update={"files": [_planned(f) for f in found]})


def _probe_hosts(hosts: list[str], context: RemoteContext, book: _HostBook) -> str | None:
    """Whether the hosts answer at all (any HTTP answer counts), decided before anything asks for credentials:
    offline, a dataset is "unreachable", not "needs credentials". Returns the first host's cause when one is down."""
    for host in hosts:
        if book.all_up([host]) or book.down([host]):
            continue
        bases = (kaggle_base_url(), zenodo_base_url(), figshare_base_url(), huggingface_base_url())
        scheme = next((urlsplit(b).scheme for b in bases if urlsplit(b).netloc == host), "https")
        try:
            context.session.get_json(f"{scheme}://{host}/", use_cache=False)
        except (TransportError, BlockedError) as exc:
            book.mark([host], exc)
        except HttpError:
            book.mark([host])
        else:
            book.mark([host])
    return book.down(hosts)


def _planned(found: RemoteFile) -> PlannedFile:
    return PlannedFile(name=found.name, size=found.size, basis=found.basis, uncompressed=found.uncompressed)


STATE_TEXT = {"fetched": "already fetched", "mirror": "in the mirror (copied, no network)",
              "local": "local files (copied)", "to_fetch": "to fetch"}


def plan_lines(plan: FetchPlan, manifests: str = "", *, with_errors: bool = True) -> list[str]:
    """The plan as text: a row per dataset that can be fetched, `✗ dataset <id>: <cause>` per one that cannot
    (left out with `with_errors=False` when the fetch prints those itself), then the totals: bytes to download,
    what is already there, the free disk needed and available."""
    from rich.filesize import decimal

    def size(value: int | None) -> str:
        return "unknown" if value is None else decimal(value)

    raw = Path(plan.data_dir) / "raw"
    ready = [d for d in plan.datasets if not d.blocked]
    lines = [f"Fetch plan: {len(plan.datasets)} dataset(s){' in ' + manifests if manifests else ''} → {raw}"]
    if ready:
        width = max(len(d.dataset_id) for d in ready)
        lines.append(f"  {'dataset':<{width}}  {'source':<11}  {'host':<24}  {'files':>5}  {'download':>10}  state")
        for d in ready:
            state = STATE_TEXT[d.state] + (f"; {size(d.partial_bytes)} to resume" if d.partial_bytes else "")
            unpacked = sum(f.uncompressed or 0 for f in d.files)
            state += (f"; unpacks to {size(unpacked)}" if unpacked else "") + (f" ({d.note})" if d.note else "")
            lines.append(f"  {d.dataset_id:<{width}}  {d.source or '-':<11}  {', '.join(d.hosts) or '-':<24}  "
                         f"{len(d.files) or '-':>5}  {_download_text(d, size):>10}  {state}")
    if with_errors:
        lines += [f"✗ dataset {d.dataset_id}: {d.error}" for d in plan.datasets if d.blocked]
    fetched = [d for d in plan.datasets if d.state == "fetched"]
    to_fetch = [d for d in plan.datasets if d.state == "to_fetch"]
    unknown = sum(d.unknown_files for d in to_fetch)
    resume = sum(d.partial_bytes for d in to_fetch)
    lines.append(
        f"Already fetched: {len(fetched)} dataset(s), {size(sum(d.known_bytes for d in fetched))}. "
        f"To download: {len(to_fetch)} dataset(s) from {len({h for d in to_fetch for h in d.hosts})} host(s), "
        f"{size(sum(d.download_bytes for d in to_fetch))}"
        + (f" + {unknown} file(s) of unknown size" if unknown else "")
        + (f"; {size(resume)} of interrupted downloads resume" if resume else "") + ".")
    free = "unknown" if plan.free_bytes is None else size(plan.free_bytes)
    short = plan.free_bytes is not None and plan.free_bytes < plan.disk_bytes
    lines.append(f"Disk: {'at least ' if unknown else ''}{size(plan.disk_bytes)} needed in {plan.data_dir} "
                 f"(archives lie beside their extracted files until removed; converted PNGs come on top), "
                 f"{free} free{' — NOT ENOUGH' if short else ''}.")
    if plan.blocked:
        lines.append(f"{len(plan.blocked)} dataset(s) cannot be fetched now; the others go on.")
    return lines


def _download_text(plan: DatasetPlan, size) -> str:
    if plan.state != "to_fetch":
        return "-"
    if plan.known_bytes == 0 and plan.unknown_files:
        return "unknown"
    return f"≥{size(plan.download_bytes)}" if plan.unknown_files else size(plan.download_bytes)

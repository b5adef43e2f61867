"""The whole `mmbu build` at the paper's scale (~78K samples over ~40 datasets) on this machine.

Run by hand:

    .venv/bin/python benchmarks/build_scale.py [--samples 78000] [--datasets 40] [--jobs 2] [--write-results]

A synthetic corpus is generated once into `benchmarks/.work/build_scale/` (git-ignored; regenerated
when `--samples`/`--datasets` change) with Pillow and numpy: local-source datasets mixing
folder-per-class PNG and JPEG classification, image/mask pairs with a few objects each, and COCO
box files, 64–128 px images, and manifests with real taxonomy terms (checked by
`mmbu manifests validate` before timing). Dataset sizes are skewed like the paper's sources: one
large dataset (~15% of the samples) and a long tail.

Timed, each as a fresh `mmbu build` process (interpreter start included):

* full build with `--jobs J` into an empty data folder;
* no-op rebuild (nothing changed) — must take seconds;
* peer: the same source images decoded and written as PNG by a plain Pillow loop on J processes,
  the floor of per-image cost; the ratio build / floor says what the pipeline adds around it.

Peak RSS is sampled every 0.2 s with psutil over the whole process tree (sum) and per process (max).

``--baseline-ref REF`` also builds with the toolkit as of git REF (the tree extracted with ``git archive``;
its packages found first through PYTHONPATH), alternately with the current one, ``--repeat`` times, each
with its own Pillow floor run, so that every ratio compares runs taken minutes apart on this shared machine.

Every build that follows the deletion of a data folder starts after `settle_deletions`: ext4 without a journal
does not reuse a recently freed inode, and a build right after a deletion of ~200K files paid a scan past each of
them for every file it created (up to a quarter of its time).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import threading
import zipfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil
import yaml
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "benchmarks" / ".work" / "build_scale"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
HEADING = "## Full build at paper scale"
MMBU = [sys.executable, "-m", "mmbu"]

CURATION = {"round": 3, "reviewers": ["benchmark"]}
# Metadata profiles taken from the bundled manifests and the build tests (valid taxonomy terms).
PROFILES = {
    "blood": {
        "metadata": {"image_source": "synthetic benchmark images", "domain": "hematology",
                     "modality": "light microscopy", "sub_modality": "brightfield microscopy", "stain": "Giemsa",
                     "specimen": "human", "topic": "blood cells", "original_task": "cell classification"},
        "labels": {"lym": "lymphocyte", "neu": "neutrophil", "mon": "monocyte", "eos": "eosinophil",
                   "bas": "basophil"},
        "questions": {"options_name": "blood cell type", "n_options": 4},
    },
    "fundus": {
        "metadata": {"image_source": "synthetic benchmark images", "domain": "ophthalmology",
                     "modality": "optical imaging", "sub_modality": "fundus photography", "specimen": "human",
                     "specimen_subregion": "retina", "topic": "retinal findings", "original_task": "grading"},
        "labels": {"normal": "normal retina", "microaneurysms": "retina with microaneurysms",
                   "haemorrhage": "retina with haemorrhages"},
        "questions": {"options_name": "retinal appearance", "preparation": "fundus photograph", "n_options": 3},
    },
    "mri": {
        "metadata": {"image_source": "synthetic benchmark images", "domain": "radiology",
                     "modality": "magnetic resonance imaging",
                     "sub_modality": "structural magnetic resonance imaging", "specimen": "human",
                     "topic": "body region on a magnetic resonance image", "original_task": "body region"},
        "labels": {"abdomen": "abdomen", "brain": "brain", "knee": "knee", "pelvis": "pelvis"},
        "questions": {"options_name": "body region", "n_options": 4},
    },
    "nuclei": {
        "metadata": {"image_source": "synthetic benchmark images", "domain": "cell biology",
                     "modality": "fluorescence microscopy", "sub_modality": "epifluorescence microscopy",
                     "specimen": "cell culture", "topic": "nuclei", "original_task": "nucleus segmentation"},
        "labels": {"nuc": "interphase nucleus", "mit": "mitotic figure", "apo": "apoptotic nucleus"},
        "questions": {"options_name": "nuclear appearance", "target_name": "nucleus", "n_options": 3},
    },
}
# (layout kind, profile, image suffix): the mix cycles through these
KINDS = [("folder_per_class", "blood", ".png"), ("folder_per_class", "fundus", ".jpg"),
         ("folder_per_class", "mri", ".png"), ("image_mask_pairs", "nuclei", ".png"),
         ("coco", "blood", ".jpg")]


@dataclass(frozen=True)
class DatasetPlan:
    dataset_id: str
    kind: str
    profile: str
    suffix: str
    samples: int
    seed: int


def plan_corpus(total: int, datasets: int) -> list[DatasetPlan]:
    """Skewed sizes: one dataset with ~15% of the samples, the rest geometric-ish, summing to `total`."""
    rng = np.random.default_rng(7)
    weights = np.sort(rng.pareto(1.2, datasets - 1) + 0.3)[::-1]
    big = max(1, int(total * 0.15))
    rest = np.maximum(20, np.floor(weights / weights.sum() * (total - big))).astype(int)
    rest[0] += (total - big) - rest.sum()  # exact total
    sizes = [big, *rest.tolist()]
    plans = []
    for index, size in enumerate(sizes):
        kind, profile, suffix = KINDS[index % len(KINDS)]
        plans.append(DatasetPlan(f"bench{index:02d}_{kind.split('_')[0]}", kind, profile, suffix, int(size), index))
    return plans


def _texture(rng: np.random.Generator, size: int, channels: int) -> np.ndarray:
    """A smooth blob pattern with mild noise: compresses like real small biomedical crops, unlike pure noise."""
    y, x = np.mgrid[0:size, 0:size].astype(np.float32)
    image = np.zeros((size, size), np.float32)
    for _ in range(4):
        cy, cx, radius = rng.uniform(0, size, 2).tolist() + [rng.uniform(size / 8, size / 3)]
        image += np.exp(-((y - cy) ** 2 + (x - cx) ** 2) / (2 * radius**2))
    image = image / image.max() * 200 + rng.normal(0, 6, image.shape)
    image = np.clip(image, 0, 255).astype(np.uint8)
    return np.stack([image, np.roll(image, 3, 0), np.roll(image, 5, 1)], -1) if channels == 3 else image


def _save(array: np.ndarray, path: Path) -> None:
    Image.fromarray(array).save(path, quality=90) if path.suffix == ".jpg" else Image.fromarray(array).save(path)


def write_dataset(plan: DatasetPlan, src: Path) -> list[str]:
    """Write one dataset's source files; returns the relative paths of its images (for the Pillow floor)."""
    rng = np.random.default_rng(plan.seed)
    root = src / plan.dataset_id
    labels = list(PROFILES[plan.profile]["labels"])
    written: list[str] = []
    annotations: list[dict] = []
    images: list[dict] = []
    for index in range(plan.samples):
        size = int(rng.choice([64, 96, 128]))
        if plan.kind == "folder_per_class":
            folder = root / labels[index % len(labels)]
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"img{index:06d}{plan.suffix}"
            _save(_texture(rng, size, 3 if plan.profile != "mri" else 1), path)
        elif plan.kind == "image_mask_pairs":
            (root / "images").mkdir(parents=True, exist_ok=True)
            (root / "masks").mkdir(parents=True, exist_ok=True)
            image = _texture(rng, size, 1)
            mask = np.zeros((size, size), np.uint8)
            for value in range(1, int(rng.integers(2, 5)) + 1):  # a few separate objects
                cls = 1 + value % len(labels)
                y0, x0 = (int(v) for v in rng.integers(0, size - 16, 2))
                mask[y0:y0 + 12, x0:x0 + 12] = cls
            image[mask > 0] = 220
            path = root / "images" / f"field{index:06d}.png"
            _save(image, path)
            _save(mask, root / "masks" / f"field{index:06d}.png")
        else:  # coco
            (root / "images").mkdir(parents=True, exist_ok=True)
            path = root / "images" / f"img{index:06d}{plan.suffix}"
            _save(_texture(rng, size, 3), path)
            images.append({"id": index, "file_name": path.name, "width": size, "height": size})
            for number in range(int(rng.integers(1, 4))):
                x, y = (float(v) for v in rng.integers(0, size - 20, 2))
                annotations.append({"id": len(annotations), "image_id": index, "category_id": 1 + number % len(labels),
                                    "bbox": [x, y, 16.0, 16.0]})
        written.append(str(path.relative_to(src)))
    if plan.kind == "coco":
        categories = [{"id": i + 1, "name": name} for i, name in enumerate(labels)]
        (root / "annotations.json").write_text(json.dumps(
            {"images": images, "annotations": annotations, "categories": categories}), encoding="utf-8")
    # the archive a Zenodo/Kaggle source would serve (stored: PNG and JPEG are compressed already)
    with zipfile.ZipFile(src / f"{plan.dataset_id}.zip", "w", zipfile.ZIP_STORED) as archive:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(root).as_posix())
    return written


def manifest_document(plan: DatasetPlan, src: Path, sources: str) -> dict:
    """A valid manifest; the source path is relative to this repository, whose tree the corpus sits in (local
    sources are resolved from the enclosing repository, which is not the synthetic one; absolute paths are
    refused)."""
    profile = PROFILES[plan.profile]
    metadata = profile["metadata"] | {"dataset_name": f"benchmark dataset {plan.seed}",
                                      "url": f"https://example.org/bench/{plan.dataset_id}"}
    labels = dict(profile["labels"])
    if plan.kind == "folder_per_class":
        tasks, layout = ["ungrounded_classification"], {"kind": "folder_per_class", "images": f"*{plan.suffix}"}
    elif plan.kind == "image_mask_pairs":
        tasks = ["box_grounded_classification", "mask_grounded_classification", "object_detection"]
        values = {i + 1: name for i, name in enumerate(labels)}
        layout = {"kind": "image_mask_pairs", "images": "images/*.png", "masks": "masks/*.png",
                  "mask_values": values, "instances": "components"}
    else:
        tasks = ["box_grounded_classification", "object_detection"]
        layout = {"kind": "coco", "annotations": "annotations.json", "image_root": "images"}
    questions = dict(profile["questions"])
    if plan.kind != "folder_per_class":
        questions.setdefault("target_name", "cell")
    return {"id": plan.dataset_id, "title": f"Synthetic benchmark dataset {plan.seed}", "license": "CC-BY-4.0",
            "citation": "synthetic data generated by benchmarks/build_scale.py",
            "source": {"kind": "local",
                       "path": (src / f"{plan.dataset_id}{'.zip' if sources == 'zip' else ''}").relative_to(ROOT).as_posix()},
            "tasks": tasks, "layout": layout,
            "metadata": metadata, "labels": labels, "questions": questions, "curation": CURATION}


def check_manifests(folder: Path) -> None:
    """The generated manifests pass the checks `mmbu build` makes (evidence is the catalogue's rule, not the build's)."""
    from mmbu.curation.manifest.validate import validate_files
    from mmbu.taxonomy import load_taxonomy

    result = validate_files(sorted(folder.glob("*.yaml")), load_taxonomy(None), require_evidence=False)
    if result.problems:
        raise SystemExit("the generated manifests are invalid:\n" + "\n".join(map(str, result.problems)))


def generate_corpus(total: int, datasets: int, jobs: int, sources: str) -> tuple[Path, list[DatasetPlan]]:
    """The repository (src/ + manifests/datasets/) for this size; images are reused when already complete."""
    repo = WORK / f"repo-{total}x{datasets}-{sources}"
    plans = plan_corpus(total, datasets)
    done = repo / "complete.json"
    if not done.exists():
        shutil.rmtree(repo, ignore_errors=True)
        (repo / "src").mkdir(parents=True)
        started = time.perf_counter()
        with ProcessPoolExecutor(jobs) as pool:
            listings = list(pool.map(write_dataset, plans, [repo / "src"] * len(plans)))
        (repo / "images.txt").write_text("\n".join(p for listing in listings for p in listing) + "\n",
                                         encoding="utf-8")
        done.write_text(json.dumps({"samples": total, "datasets": datasets,
                                    "seconds": round(time.perf_counter() - started, 1)}), encoding="utf-8")
    # manifests are rewritten every run (cheap) so they follow the current manifest rules
    manifests = repo / "manifests" / "datasets"
    manifests.mkdir(parents=True, exist_ok=True)
    for plan in plans:
        document = manifest_document(plan, repo / "src", sources)
        (manifests / f"{plan.dataset_id}.yaml").write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    check_manifests(manifests)
    return repo, plans


class TreeMemory:
    """Peak RSS of a process and its children, sampled in a thread (sum over the tree and the largest one)."""

    def __init__(self, pid: int, interval: float = 0.2) -> None:
        self.root = psutil.Process(pid)
        self.interval, self.peak_sum, self.peak_one = interval, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.is_set():
            try:
                processes = [self.root, *self.root.children(recursive=True)]
                sizes = []
                for process in processes:
                    try:
                        sizes.append(process.memory_info().rss)
                    except psutil.Error:
                        pass
                self.peak_sum = max(self.peak_sum, sum(sizes))
                self.peak_one = max(self.peak_one, max(sizes, default=0))
            except psutil.Error:
                pass
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class Timed:
    seconds: float
    cpu_seconds: float  # user + system of the command and every child it waited for
    returncode: int
    peak_sum_mib: float
    peak_one_mib: float
    output: str
    steal_seconds: float = 0.0  # CPU time the hypervisor gave to other guests meanwhile (all cores)


def stolen_seconds() -> float:
    """The machine's `steal` time so far (/proc/stat): a build that ran while the host was busy elsewhere shows it."""
    fields = Path("/proc/stat").read_text(encoding="ascii").split("\n", 1)[0].split()
    return int(fields[8]) / os.sysconf("SC_CLK_TCK") if len(fields) > 8 else 0.0


# ext4 without a journal (this VM's root file system: `/sys/fs/ext4/<device>/journal_task` is `<none>`) does not
# reuse a free inode whose deletion time is under 60 s old, or under 360 s while its inode-table block is dirty in
# the buffer cache (`find_inode_bit` -> `recently_deleted` in linux fs/ext4/ialloc.c: RECENTCY_MIN 60, RECENTCY_DIRTY
# 300), and skipping each one costs a buffer lookup. A build
# creates files in the very blocks it dirties, so right after the previous build's data folder (~200K files) was
# deleted every file it created scanned past all of them: perf put 61 % of a fetch's CPU in `recently_deleted`
# and its buffer lookups, and the 40-dataset corpus took 74-87 s to fetch instead of 10-12 s (still 36-82 s after
# a sync and 65 s). Writing the deletions out and dropping the clean cache ends the scan at once; the corpus is
# then read back so that every build starts from the same warm cache.
RECENTLY_DELETED_DIRTY_S = 360 + 5


def _read_through(folders: list[Path]) -> int:
    """Read every file under `folders` (not into `.git` or another `.work`) so that it is in the page cache."""
    count = 0
    for top in folders:
        for folder, subfolders, files in os.walk(top):
            subfolders[:] = [name for name in subfolders if name not in (".git", ".work")]
            for name in files:
                try:
                    with open(os.path.join(folder, name), "rb") as file:
                        while file.read(1 << 20):
                            pass
                    count += 1
                except OSError:  # a dangling link, a socket
                    pass
    return count


def drop_clean_cache() -> bool:
    """Write everything out and drop the clean page cache; False without root (nothing dropped)."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1\n", encoding="ascii")
    except OSError:
        return False
    return True


def settle_deletions(corpus: Path) -> str:
    """After a large deletion: sync and drop the clean page cache (root only), then read back the corpus, the
    Python environments and the toolkits (current and baseline) so that every build starts equally warm; without
    root, wait until no deleted inode counts as recent."""
    started = time.perf_counter()
    if not drop_clean_cache():
        time.sleep(RECENTLY_DELETED_DIRTY_S)
        return f"waited {time.perf_counter() - started:.0f} s"
    files = _read_through([corpus, Path(sys.prefix), Path(sys.base_prefix), ROOT,
                           *WORK.glob("baseline-*")])
    return f"cache dropped, {files} files read back ({time.perf_counter() - started:.0f} s)"


def remove_and_settle(folder: Path, corpus: Path) -> None:
    """Delete `folder`, if there is one, so that the next build does not pay for its deletion."""
    if folder.exists():
        shutil.rmtree(folder, ignore_errors=True)
        print(f"deleted {folder.name}: {settle_deletions(corpus)}", flush=True)


def timed(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> Timed:
    before, stolen = resource.getrusage(resource.RUSAGE_CHILDREN), stolen_seconds()
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    memory = TreeMemory(process.pid)
    output, _ = process.communicate()
    seconds = time.perf_counter() - started
    memory.stop()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if process.returncode not in (0, 1) or "Traceback" in output:
        raise SystemExit(f"{' '.join(command)} crashed (exit {process.returncode}):\n{output[-4000:]}")
    return Timed(seconds, cpu, process.returncode, memory.peak_sum / 2**20, memory.peak_one / 2**20, output,
                 stolen_seconds() - stolen)


SUBPACKAGES = ("benchmark_eval", "build", "core", "curation", "taxonomy")


# `python -m mmbu` with the editable install's finder taken out, so that PYTHONPATH's copy is the one imported
# (forked workers inherit it)
BASELINE_MMBU = [sys.executable, "-c", "import runpy, sys; sys.meta_path[:] = [f for f in sys.meta_path if "
                 "'editable' not in repr(f)]; runpy.run_module('mmbu', run_name='__main__', alter_sys=True)"]


def baseline_env(ref: str, name: str) -> dict[str, str]:
    """An environment in which BASELINE_MMBU runs the toolkit as of git `ref` (extracted into WORK/name)."""
    home = WORK / name
    shutil.rmtree(home, ignore_errors=True)
    tree, package = home / "tree", home / "pkg" / "mmbu"
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    shutil.copytree(tree / "mmbu", package)
    for name in SUBPACKAGES:  # the editable install's mapping (mmbu.build -> build/ ...) as links
        if (tree / name).is_dir():
            (package / name).symlink_to(tree / name, target_is_directory=True)
    env = dict(os.environ, PYTHONPATH=str(home / "pkg"))
    probe = BASELINE_MMBU[2].split("; runpy")[0] + "; import mmbu.build; print(mmbu.build.__path__[0])"
    where = subprocess.run([sys.executable, "-c", probe], env=env, cwd=home, capture_output=True, text=True,
                           check=True).stdout.strip()
    if not where.startswith(str(home)):
        raise SystemExit(f"the baseline toolkit is not the one imported ({where})")
    return env


def build_command(repo: Path, data: Path, jobs: int, mmbu: list[str] = MMBU, extra: tuple[str, ...] = (),
                  profile: str | None = "full") -> list[str]:
    """`mmbu build` of the corpus; `profile` (default full: every sample, what this benchmark measures) is passed
    to the current toolkit only (a baseline from before composition profiles builds every sample anyway)."""
    chosen = ("--profile", profile) if profile and mmbu is MMBU else ()
    return [*mmbu, "build", "--manifests", str(repo / "manifests" / "datasets"), "--data", str(data),
            "--jobs", str(jobs), *chosen, *extra]


def _pillow_chunk(paths: list[str]) -> int:
    """The floor: decode each source image and write it as PNG (what the convert step must at least do)."""
    out = WORK / f"pillow-floor-{os.getppid()}"  # the benchmark's own folder (another may run at once)
    for index, path in enumerate(paths):
        with Image.open(path) as image:
            image.load()
            image.save(out / f"{os.getpid()}-{index % 64}.png")
    return len(paths)


def pillow_floor(repo: Path, jobs: int) -> tuple[float, float]:
    """Wall and CPU seconds of the plain Pillow loop over every source image."""
    paths = [str(repo / "src" / p) for p in (repo / "images.txt").read_text(encoding="utf-8").split()]
    shutil.rmtree(WORK / f"pillow-floor-{os.getpid()}", ignore_errors=True)
    (WORK / f"pillow-floor-{os.getpid()}").mkdir(parents=True)
    chunks = [paths[i::jobs * 8] for i in range(jobs * 8)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with ProcessPoolExecutor(jobs) as pool:
        total = sum(pool.map(_pillow_chunk, chunks))
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if total != len(paths):
        raise SystemExit(f"the Pillow floor converted {total} of {len(paths)} images")
    return seconds, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


@dataclass
class Timeline:
    """Where the wall time of a build went, from the per-dataset start and duration in build-report.json."""

    before_first_dataset: float  # start-up, manifest checks, the first fetch
    parallel: float  # at least `jobs` datasets running
    partly_idle: float  # fewer datasets running than workers (the tail, or waiting for fetches)
    after_last_dataset: float  # the release and the report
    largest_dataset: tuple[str, float]


def timeline(document: dict, started_at: float, finished_at: float, jobs: int) -> Timeline:
    spans = [(d["started_at"], d["started_at"] + d["seconds"]) for d in document["datasets"]]
    first, last = min(s for s, _ in spans), max(e for _, e in spans)
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    parallel = partly_idle = 0.0
    running, previous = 0, first
    for moment, change in events:
        if running >= jobs:
            parallel += moment - previous
        else:
            partly_idle += moment - previous
        running, previous = running + change, moment
    largest = max(document["datasets"], key=lambda d: d["seconds"])
    return Timeline(first - started_at, parallel, partly_idle, finished_at - last,
                    (largest["dataset_id"], largest["seconds"]))


def release_rows(data: Path) -> dict[str, int]:
    return json.loads((data / "build-report.json").read_text(encoding="utf-8"))["release_rows"]


def write_results(section: str) -> None:
    text = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else "# Benchmark results\n"
    pattern = re.compile(rf"^{re.escape(HEADING)}\n.*?(?=^## |\Z)", re.S | re.M)
    text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=78_000)
    parser.add_argument("--datasets", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--sources", choices=["zip", "folder"], default="zip",
                        help="each dataset as one zip archive (like Zenodo/Kaggle) or as a folder of files")
    parser.add_argument("--quick", action="store_true", help="4,000 samples over 10 datasets (a smoke run)")
    parser.add_argument("--keep", action="store_true", help="keep the built data folder for inspection")
    parser.add_argument("--write-results", action="store_true", help=f"replace the '{HEADING}' section of RESULTS.md")
    parser.add_argument("--baseline-ref", help="also build with the toolkit as of this git ref, alternately")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of (current, baseline, floor) with --baseline-ref")
    parser.add_argument("--profiles", help="compare composition profiles instead, e.g. full,paper: each a fresh "
                                           "build of the same corpus, alternately, --repeat rounds")
    parser.add_argument("--keep-duplicates", action="store_true",
                        help="pass --keep-duplicates to mmbu build (the synthetic textures are near-duplicates by the "
                             "hundred, which the cross-dataset check pairs up at quadratic cost)")
    args = parser.parse_args()
    if args.quick:
        args.samples, args.datasets = 4_000, 10
    if args.baseline_ref:
        compare(args)
        return
    if args.profiles:
        compare_profiles(args)
        return

    started = time.perf_counter()
    repo, plans = generate_corpus(args.samples, args.datasets, args.jobs, args.sources)
    print(f"corpus: {args.samples} samples over {len(plans)} datasets in {repo} "
          f"({time.perf_counter() - started:.0f} s to prepare)", flush=True)
    data = WORK / f"data-{args.samples}x{args.datasets}-{args.sources}"
    shutil.rmtree(data, ignore_errors=True)
    print(f"before the build: {settle_deletions(repo)}", flush=True)  # whatever ran before may have deleted

    started_at = time.time()
    full = timed(build_command(repo, data, args.jobs), cwd=repo)
    rows = release_rows(data)
    phases = timeline(json.loads((data / "build-report.json").read_text(encoding="utf-8")), started_at,
                      started_at + full.seconds, args.jobs)
    print(f"full build phases: {phases}", flush=True)
    print(f"full build: {full.seconds:.1f} s wall, {full.cpu_seconds:.1f} s CPU, exit {full.returncode}, "
          f"rows {rows}", flush=True)
    noop = timed(build_command(repo, data, args.jobs), cwd=repo)
    document = json.loads((data / "build-report.json").read_text(encoding="utf-8"))
    ran = sorted({step for d in document["datasets"] for step in d["ran"]})
    if ran or document["release_written"]:
        raise SystemExit(f"the rebuild was not a no-op: steps {ran} ran, release written: "
                         f"{document['release_written']}")
    print(f"no-op rebuild: {noop.seconds:.1f} s wall, {noop.cpu_seconds:.1f} s CPU", flush=True)
    floor, floor_cpu = pillow_floor(repo, args.jobs)
    print(f"Pillow floor: {floor:.1f} s wall, {floor_cpu:.1f} s CPU", flush=True)

    section = "\n".join([
        HEADING, "",
        f"`benchmarks/build_scale.py --samples {args.samples} --datasets {args.datasets} --jobs {args.jobs} "
        f"--sources {args.sources}`: synthetic corpus of local sources ({args.sources}: "
        + ("one stored zip per dataset, fetched, pinned and extracted like a Zenodo archive" if args.sources == "zip"
           else "one folder of files per dataset, each file pinned") +
        "), folder-per-class PNG/JPEG, image/mask pairs with 2–5 objects and COCO boxes, 64–128 px, one dataset "
        f"with 15% of the samples; each run a fresh `mmbu build --jobs {args.jobs}` process (start-up included). "
        "Peer: the same source images decoded and written as PNG by a plain Pillow loop on the same number of "
        "processes (the floor of per-image cost). CPU = user + system of the whole process tree; peak RSS "
        "sampled every 0.2 s (sum over the tree, and the largest process). The machine is shared with other "
        "work, so CPU time is the steadier figure.", "",
        "| run | wall s | CPU s | samples/s (wall) | peak RSS sum MiB | largest process MiB |",
        "|---|---|---|---|---|---|",
        f"| full build | {full.seconds:.1f} | {full.cpu_seconds:.1f} | {args.samples / full.seconds:.0f} "
        f"| {full.peak_sum_mib:.0f} | {full.peak_one_mib:.0f} |",
        f"| no-op rebuild | {noop.seconds:.1f} | {noop.cpu_seconds:.1f} | – | {noop.peak_sum_mib:.0f} "
        f"| {noop.peak_one_mib:.0f} |",
        f"| Pillow floor (decode + PNG) | {floor:.1f} | {floor_cpu:.1f} | {args.samples / floor:.0f} | – | – |",
        "",
        f"Full build / Pillow floor: **{full.seconds / floor:.1f}× wall, {full.cpu_seconds / floor_cpu:.1f}× CPU**. "
        "Release rows: " + ", ".join(f"{k} {v}" for k, v in sorted(rows.items())) + ".", "",
        f"Wall time of the full build by phase (from each dataset's start and duration in build-report.json): "
        f"start-up, manifest checks and first fetch {phases.before_first_dataset:.1f} s; {args.jobs} or more "
        f"datasets in flight {phases.parallel:.1f} s; fewer datasets than workers {phases.partly_idle:.1f} s "
        f"(largest dataset {phases.largest_dataset[0]}: {phases.largest_dataset[1]:.1f} s); release and report "
        f"after the last dataset {phases.after_last_dataset:.1f} s.", "",
    ])
    print(section)
    if args.write_results:
        write_results(section)
    if not args.keep:
        shutil.rmtree(data, ignore_errors=True)
    shutil.rmtree(WORK / f"pillow-floor-{os.getpid()}", ignore_errors=True)


def compare(args: argparse.Namespace) -> None:
    """Current vs `--baseline-ref` builds and the Pillow floor, alternately, `--repeat` rounds; one line each."""
    repo, plans = generate_corpus(args.samples, args.datasets, args.jobs, args.sources)
    corpus = f"{args.samples}x{args.datasets}-{args.sources}"  # two comparisons of other corpora may run at once
    variants = {"current": None, f"@{args.baseline_ref}": baseline_env(args.baseline_ref,
                                                                      f"baseline-{args.baseline_ref}-{corpus}")}
    print(f"corpus: {args.samples} samples over {len(plans)} datasets, --jobs {args.jobs}", flush=True)
    print(f"before the first build: {settle_deletions(repo)}", flush=True)  # whatever ran before may have deleted
    print("| round | toolkit | full build wall s | CPU s | largest process MiB | tree peak MiB | after last dataset s "
          "| no-op wall s | floor wall s | floor CPU s | build / floor wall | load | steal s (build) |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for round_ in range(args.repeat):
        order = list(variants.items()) if round_ % 2 == 0 else list(variants.items())[::-1]
        for tag, env in order:
            data = WORK / f"data-compare-{corpus}-{tag}"
            remove_and_settle(data, repo)
            started_at = time.time()
            command = build_command(repo, data, args.jobs, BASELINE_MMBU if env else MMBU,
                                    ("--keep-duplicates",) if args.keep_duplicates else ())
            full = timed(command, cwd=repo, env=env)
            phases = timeline(json.loads((data / "build-report.json").read_text(encoding="utf-8")), started_at,
                              started_at + full.seconds, args.jobs)
            noop = timed(command, cwd=repo, env=env)
            floor, floor_cpu = pillow_floor(repo, args.jobs)
            load = Path("/proc/loadavg").read_text().split()[0]
            print(f"| {round_ + 1} | {tag} | {full.seconds:.1f} | {full.cpu_seconds:.1f} | {full.peak_one_mib:.0f} | "
                  f"{full.peak_sum_mib:.0f} | {phases.after_last_dataset:.1f} | {noop.seconds:.1f} | {floor:.1f} | "
                  f"{floor_cpu:.1f} | {full.seconds / floor:.2f}x | {load} | {full.steal_seconds:.1f} |", flush=True)
            if not args.keep:
                remove_and_settle(data, repo)
    shutil.rmtree(WORK / f"pillow-floor-{os.getpid()}", ignore_errors=True)


PROFILES_HEADING = "## Composition profiles: paper against full"


@dataclass
class ProfileRun:
    profile: str
    build: Timed
    convert_seconds: float  # the convert step's own wall time, summed over datasets (build-report.json step_seconds)
    convert_cpu_seconds: float  # ... and its CPU time (step_cpu_seconds)
    images: int  # PNGs converted (work/<id>/images)
    rows: int


def profile_run(repo: Path, data: Path, jobs: int, profile: str, keep_duplicates: bool) -> ProfileRun:
    build = timed(build_command(repo, data, jobs, extra=("--keep-duplicates",) if keep_duplicates else (),
                                profile=profile), cwd=repo)
    document = json.loads((data / "build-report.json").read_text(encoding="utf-8"))
    convert = sum(d.get("step_seconds", {}).get("convert", 0.0) for d in document["datasets"])
    convert_cpu = sum(d.get("step_cpu_seconds", {}).get("convert", 0.0) for d in document["datasets"])
    images = sum(1 for _ in (data / "work").glob("*/images/*.png"))
    return ProfileRun(profile, build, convert, convert_cpu, images, sum(document["release_rows"].values()))


def compare_profiles(args: argparse.Namespace) -> None:
    """Fresh builds of one corpus under each of `--profiles`, alternately, `--repeat` rounds: the convert step's
    time, the whole build's wall and CPU time, the images converted and the rows released, and each profile's
    ratios against the first one."""
    profiles = [p.strip() for p in args.profiles.split(",") if p.strip()]
    repo, plans = generate_corpus(args.samples, args.datasets, args.jobs, args.sources)
    corpus = f"{args.samples}x{args.datasets}-{args.sources}"
    print(f"corpus: {args.samples} samples over {len(plans)} datasets, --jobs {args.jobs}", flush=True)
    print(f"before the first build: {settle_deletions(repo)}", flush=True)
    runs: dict[str, list[ProfileRun]] = {p: [] for p in profiles}
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    for round_ in range(args.repeat):
        for profile in profiles if round_ % 2 == 0 else profiles[::-1]:
            data = WORK / f"data-profiles-{corpus}-{profile}"
            remove_and_settle(data, repo)
            run = profile_run(repo, data, args.jobs, profile, args.keep_duplicates)
            runs[profile].append(run)
            print(f"round {round_ + 1} {profile}: convert {run.convert_seconds:.1f} s wall / "
                  f"{run.convert_cpu_seconds:.1f} s CPU, build {run.build.seconds:.1f} s "
                  f"wall / {run.build.cpu_seconds:.1f} s CPU, {run.images} images converted, {run.rows} rows, "
                  f"load {Path('/proc/loadavg').read_text().split()[0]}", flush=True)
            if not args.keep:
                remove_and_settle(data, repo)
    base = profiles[0]

    def mean(profile: str, value) -> float:
        return sum(value(run) for run in runs[profile]) / len(runs[profile])

    table = ["| profile | images converted | rows | convert step wall s | convert step CPU s | build wall s "
             f"| build CPU s | convert CPU / {base} | build wall / {base} | build CPU / {base} |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for profile in profiles:
        convert_cpu = mean(profile, lambda r: r.convert_cpu_seconds)
        wall, cpu = mean(profile, lambda r: r.build.seconds), mean(profile, lambda r: r.build.cpu_seconds)
        table.append(f"| {profile} | {mean(profile, lambda r: r.images):,.0f} | {mean(profile, lambda r: r.rows):,.0f} "
                     f"| {mean(profile, lambda r: r.convert_seconds):.1f} | {convert_cpu:.1f} | {wall:.1f} | {cpu:.1f} "
                     f"| {convert_cpu / mean(base, lambda r: r.convert_cpu_seconds):.3f} "
                     f"| {wall / mean(base, lambda r: r.build.seconds):.3f} "
                     f"| {cpu / mean(base, lambda r: r.build.cpu_seconds):.3f} |")
    section = "\n".join([
        PROFILES_HEADING, "",
        f"`benchmarks/build_scale.py --samples {args.samples} --datasets {args.datasets} --jobs {args.jobs} "
        f"--sources {args.sources} --profiles {args.profiles} --repeat {args.repeat}"
        + (" --keep-duplicates" if args.keep_duplicates else "") + f"` ({started} UTC): the corpus of \"Full build "
        "at paper scale\" built fresh under each profile, alternately, in one run (means over the rounds). The "
        "convert step's times are the build-report's `step_seconds` (wall) and `step_cpu_seconds` (the worker's CPU) "
        "per dataset, summed over datasets; the build's wall "
        "and CPU time include fetching, layouts, rows, duplicates and the release, which every profile pays for "
        "the rows it keeps. The machine is shared (its load average is in the lines above the table), so the "
        "ratios, taken minutes apart, are the figures to read.", "", *table, ""])
    print(section)
    if args.write_results:
        text = RESULTS.read_text(encoding="utf-8")
        pattern = re.compile(rf"^{re.escape(PROFILES_HEADING)}\n.*?(?=^## |\Z)", re.S | re.M)
        text = (pattern.sub(lambda _: section + "\n", text) if pattern.search(text)
                else text.rstrip("\n") + "\n\n" + section)
        RESULTS.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()

"""Closed-answer extraction side by side: our parser and the extractors of VLMEvalKit, lmms-eval and MMMU.

All read the same real replies, labelled by hand (tests/benchmark_eval/data/closed_replies): the whole corpus,
its development part and its locked part (other sources, only scored), each locked source apart. For each
extractor: the share of clearly stated answers it reads, the wrong letters it gives to clear answers, and
the letters it gives to replies that state no answer. Disputed cases are left out.

The peers run from their own source checkouts, given by path (nothing of theirs is copied here): each
extractor module is loaded from the checkout by file, without running the package's ``__init__``
(which would pull in torch and the model zoo).

    git clone https://github.com/open-compass/VLMEvalKit          # or any checkout, at a recorded commit
    .venv/bin/python benchmarks/closed_parsers.py --vlmevalkit ../VLMEvalKit --lmms-eval ../lmms-eval \\
        --mmmu ../MMMU [--previous ../mmbu-old]   # --previous: a checkout of this project, to compare with

Paths may also come from ``MMBU_PEER_VLMEVALKIT``, ``MMBU_PEER_LMMS_EVAL``, ``MMBU_PEER_MMMU`` and
``MMBU_PREVIOUS``. Exit code 1 when a peer is missing (its row is then not in the table).
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import random
import subprocess
import sys
import time
import types
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from mmbu.benchmark_eval.parser import ReasoningMarkers, option_labels, parse_closed_answer

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "benchmark_eval" / "data" / "closed_replies" / "replies.jsonl"
Extractor = Callable[[dict], "str | None"]  # a case -> the letter read, or None


def load_file(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def namespace(name: str, folder: Path) -> None:
    """Register `name` as a package whose modules load from `folder`, without running its __init__."""
    package = types.ModuleType(name)
    package.__path__ = [str(folder)]
    sys.modules[name] = package


def commit_of(checkout: Path) -> str:
    try:
        return subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "(not a git checkout)"


def markers(case: dict) -> ReasoningMarkers:
    declared = case["reasoning"]
    if declared is None:
        return ReasoningMarkers()
    return ReasoningMarkers(tuple(tuple(pair) for pair in declared["pairs"]), declared["prefilled"])


def choices(case: dict) -> dict[str, str]:
    return dict(zip(option_labels(len(case["options"])), case["options"]))


# --- extractors -----------------------------------------------------------------------------

def ours(case: dict) -> str | None:
    return parse_closed_answer(case["reply"], case["options"], markers(case)).label


# Run in a child process: an older checkout's `mmbu` packages, mapped to its own folders as its setup.py maps them,
# so that none of this checkout's installed modules is imported beside them (the parser's modules import each other
# as `mmbu.benchmark_eval...`, which in this process is the installed checkout: two generations mixed in one row).
PREVIOUS_CHILD = r"""
import importlib, json, re, sys, time, types
from pathlib import Path
checkout = Path(sys.argv[1])
folders = {"mmbu": "mmbu", "mmbu.core": "core", "mmbu.taxonomy": "taxonomy", "mmbu.curation": "curation",
           "mmbu.build": "build", "mmbu.benchmark_eval": "benchmark_eval"}
setup = checkout / "setup.py"
if setup.is_file():
    folders.update(re.findall(r'"(mmbu(?:\.\w+)?)": "(\w+)"', setup.read_text()))
for name, folder in folders.items():
    package = types.ModuleType(name)
    package.__path__ = [str(checkout / folder)]
    sys.modules[name] = package
parser = importlib.import_module("mmbu.benchmark_eval.parser")
closed = importlib.import_module("mmbu.benchmark_eval.parser._closed")
cached = getattr(closed, "_scan", None) or getattr(closed, "_layers", None)
installed = [m.__file__ for m in list(sys.modules.values())
             if (getattr(m, "__name__", "") or "").startswith("mmbu") and getattr(m, "__file__", None)
             and not Path(m.__file__).resolve().is_relative_to(checkout.resolve())]
if installed:
    sys.exit(f"modules from outside {checkout} were imported: {installed[:3]}")
cases = json.load(sys.stdin)
labels = [parser.parse_closed_answer(c["reply"], c["options"]).label for c in cases]
timings = []
for _ in range(5):
    if cached is not None:
        cached.cache_clear()
    started = time.perf_counter()
    for c in cases:
        parser.parse_closed_answer(c["reply"], c["options"])
    timings.append((time.perf_counter() - started) / len(cases) * 1e6)
json.dump({"labels": labels, "cost": sorted(timings)[2]}, sys.stdout)
"""


def previous_parser(checkout: Path, cases: list[dict]) -> tuple[Extractor, float]:
    """This project's parser at an older commit, run on `cases` in a child process that imports only that checkout;
    the extractor answers from its readings, and the float is its median parse cost (µs per reply)."""
    child = subprocess.run([sys.executable, "-I", "-c", PREVIOUS_CHILD, str(checkout.resolve())], input=json.dumps(
        [{"reply": c["reply"], "options": c["options"]} for c in cases]), capture_output=True, text=True)
    if child.returncode:
        raise SystemExit(f"the parser of {checkout} could not be run: {child.stderr.strip()[-2000:]}")
    answer = json.loads(child.stdout)
    readings = {id(case): label for case, label in zip(cases, answer["labels"])}
    return (lambda case: readings[id(case)]), answer["cost"]


def vlmevalkit(checkout: Path) -> Extractor:
    """``vlmeval.utils.matching_util.can_infer``: the exact-matching extraction VLMEvalKit runs before (or,
    with ``--judge exact_matching``, instead of) its GPT matcher; False and 'Z' mean no letter."""
    for name, folder in (("vlmeval", "vlmeval"), ("vlmeval.smp", "vlmeval/smp"), ("vlmeval.utils", "vlmeval/utils")):
        namespace(name, checkout / folder)
    matching = importlib.import_module("vlmeval.utils.matching_util")

    def read(case: dict) -> str | None:
        letter = matching.can_infer(case["reply"], choices(case))
        return letter if letter and letter in option_labels(len(case["options"])) else None
    return read


def lmms_eval(checkout: Path) -> Extractor:
    """``lmms_eval/tasks/_task_utils/mcq_extract.extract_mcq_answer`` (the shared extractor of 15 tasks), on
    the reply after lmms-eval's own ``strip_reasoning_tags`` with the case's reasoning tags."""
    mcq = load_file(checkout / "lmms_eval/tasks/_task_utils/mcq_extract.py", "lmms_eval_mcq_extract")
    reasoning = load_file(checkout / "lmms_eval/api/reasoning.py", "lmms_eval_reasoning")

    def read(case: dict) -> str | None:
        reply = case["reply"]
        if case["reasoning"]:
            reply = reasoning.strip_reasoning_tags(reply, case["reasoning"]["pairs"])
        letter = mcq.extract_mcq_answer(reply, list(option_labels(len(case["options"]))))
        return letter or None
    return read


def mmmu(checkout: Path, which: str) -> Extractor:
    """``parse_multi_choice_response`` of the MMMU repository (``mmmu/utils/eval_utils.py``) or of its
    MMMU-Pro evaluation (``mmmu-pro/evaluate.py``). Both pick a random option when they find none; the
    generator is seeded so the table is reproducible."""
    module = load_file(checkout / which, "mmmu_" + which.replace("/", "_").removesuffix(".py"))

    def read(case: dict) -> str | None:
        random.seed(0)
        labels = list(option_labels(len(case["options"])))
        return module.parse_multi_choice_response(case["reply"], labels, choices(case)) or None
    return read


# --- scoring ---------------------------------------------------------------------------------

def score(extract: Extractor, cases: list[dict]) -> Counter:
    counts = Counter()
    for case in cases:
        letter = extract(case)
        if case["label"] is None:
            counts["no_answer"] += 1
            counts["invented"] += letter is not None
        else:
            counts["clear"] += 1
            counts["read"] += letter == case["label"]
            counts["wrong"] += letter is not None and letter != case["label"]
    return counts


def cost(extract: Extractor, cases: list[dict], clear_caches: Callable[[], None], passes: int = 5) -> float:
    """Median µs per reply over `passes` passes, the extractor's per-reply caches cleared before each."""
    timings = []
    for _ in range(passes):
        clear_caches()
        started = time.perf_counter()
        for case in cases:
            extract(case)
        timings.append((time.perf_counter() - started) / len(cases) * 1e6)
    return sorted(timings)[len(timings) // 2]


def row(name: str, counts: Counter) -> str:
    clear, none = counts["clear"], counts["no_answer"]

    def share(part: int, whole: int) -> str:
        return f"{100 * part / whole:.1f} %" if whole else "—"
    return (f"| {name} | {counts['read']}/{clear} ({share(counts['read'], clear)}) "
            f"| {counts['wrong']} ({share(counts['wrong'], clear)}) "
            f"| {counts['invented']}/{none} ({share(counts['invented'], none)}) |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vlmevalkit", type=Path, default=os.environ.get("MMBU_PEER_VLMEVALKIT"))
    parser.add_argument("--lmms-eval", type=Path, default=os.environ.get("MMBU_PEER_LMMS_EVAL"))
    parser.add_argument("--mmmu", type=Path, default=os.environ.get("MMBU_PEER_MMMU"))
    parser.add_argument("--previous", type=Path, default=os.environ.get("MMBU_PREVIOUS"),
                        help="a checkout of this project at an older commit")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    args = parser.parse_args(argv)

    cases = [json.loads(line) for line in args.corpus.read_text(encoding="utf-8").splitlines()]
    cases = [case for case in cases if not case["disputed"]]
    extractors: list[tuple[str, Extractor]] = [("MMBU (this checkout)", ours)]
    missing = []
    previous_cost = None

    def previous(path: Path) -> list[tuple[str, Extractor]]:
        nonlocal previous_cost
        extract, previous_cost = previous_parser(path, cases)
        return [(f"MMBU previous ({commit_of(path)[:8]})", extract)]

    peers = [("previous", args.previous, previous),
             ("vlmevalkit", args.vlmevalkit,
              lambda p: [(f"VLMEvalKit `can_infer` ({commit_of(p)[:8]})", vlmevalkit(p))]),
             ("lmms-eval", args.lmms_eval,
              lambda p: [(f"lmms-eval `extract_mcq_answer` ({commit_of(p)[:8]})", lmms_eval(p))]),
             ("mmmu", args.mmmu,
              lambda p: [(f"MMMU `mmmu/utils/eval_utils.py` ({commit_of(p)[:8]})", mmmu(p, "mmmu/utils/eval_utils.py")),
                         (f"MMMU-Pro `mmmu-pro/evaluate.py` ({commit_of(p)[:8]})", mmmu(p, "mmmu-pro/evaluate.py"))])]
    for key, path, build in peers:
        if path is None:
            missing.append(key)
            continue
        extractors.extend(build(Path(path)))

    locked = [c for c in cases if c["split"] == "locked"]
    splits = {"all": cases, "development (the sources the rules were written from)":
              [c for c in cases if c["split"] == "development"],
              "locked (other sources, labelled blind, only scored)": locked}
    for part in ("development", "locked"):
        subset = [c for c in cases if c["split"] == part]
        for source in dict.fromkeys(c["id"].split("/")[0] for c in subset):
            splits[f"{part}: {source}"] = [c for c in subset if c["id"].startswith(source + "/")]
    for title, subset in splits.items():
        print(f"\n{title}: {len(subset)} replies\n")
        print("| extractor | clear answers read | wrong letters (of clear) | letters given to non-answers |")
        print("|---|---|---|---|")
        for name, extract in extractors:
            print(row(name, score(extract, subset)))
    scan = importlib.import_module("mmbu.benchmark_eval.parser._closed")._scan
    print(f"\nparse cost, median of 5 passes over the corpus (per-reply caches cleared): this checkout "
          f"{cost(ours, cases, scan.cache_clear):.0f} µs/reply", end="")
    if previous_cost is not None:
        print(f", previous {previous_cost:.0f} µs/reply (its own process)", end="")
    print()
    if missing:
        print(f"\nnot run (no checkout given): {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

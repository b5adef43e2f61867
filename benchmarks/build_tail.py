"""The build's tail (what runs after the last dataset: the duplicate check and the release), current against a git ref.

    .venv/bin/python benchmarks/build_tail.py --baseline-ref REF [--samples 78000] [--datasets 410] [--rounds 4]

One data folder is built once with the current toolkit from `build_scale.py`'s corpus. Then, each round, for the
baseline and the current toolkit in turn (the order alternating from round to round): `work/duplicates.json` and
`release/` are removed, the page cache is settled (sync, drop, the rows, hash tables and converted PNGs read back,
as a build finds them right after making them), and `mmbu build` runs again: a no-op for every dataset, then the
whole duplicate search and the four release configs on `--jobs` workers. The full build's "after last dataset"
column moves with everything the datasets left behind; this isolates the tail, on the same files for both.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_scale import (  # noqa: E402
    BASELINE_MMBU,
    WORK,
    _read_through,
    baseline_env,
    build_command,
    drop_clean_cache,
    generate_corpus,
    timed,
)


def settle(data: Path) -> None:
    drop_clean_cache()  # without root the files are only read back
    _read_through([data / "work"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline-ref", required=True)
    parser.add_argument("--samples", type=int, default=78_000)
    parser.add_argument("--datasets", type=int, default=410)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    repo, _ = generate_corpus(args.samples, args.datasets, args.jobs, "zip")
    data = WORK / f"tail-{args.samples}x{args.datasets}"
    shutil.rmtree(data, ignore_errors=True)
    first = timed(build_command(repo, data, args.jobs), cwd=WORK)
    print(f"data folder built by the current toolkit: {first.seconds:.1f} s", flush=True)
    variants = {"current": (build_command(repo, data, args.jobs), None),
                f"@{args.baseline_ref}": (build_command(repo, data, args.jobs, BASELINE_MMBU),
                                          baseline_env(args.baseline_ref, f"baseline-{args.baseline_ref}-tail"))}
    # the current toolkit builds every sample as the `full` profile, whose release is release-full/
    releases = {"current": data / "release-full", f"@{args.baseline_ref}": data / "release"}
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    print("| round | toolkit | tail wall s | CPU s |\n|---:|---|---:|---:|", flush=True)
    for round_number in range(1, args.rounds + 1):
        names = list(variants) if round_number % 2 else list(reversed(variants))
        for name in names:
            shutil.rmtree(releases[name], ignore_errors=True)
            (data / "work" / "duplicates.json").unlink(missing_ok=True)
            settle(data)
            time.sleep(2)
            command, env = variants[name]
            run = timed(command, cwd=WORK, env=env)
            if run.returncode != 0 or not (releases[name] / "SHA256SUMS").is_file():
                raise SystemExit(f"{name}: the tail did not write a release (exit {run.returncode})")
            results[name].append((run.seconds, run.cpu_seconds))
            print(f"| {round_number} | {name} | {run.seconds:.1f} | {run.cpu_seconds:.1f} |", flush=True)
    means = {name: (statistics.mean(w for w, _ in runs), statistics.mean(c for _, c in runs))
             for name, runs in results.items()}
    (current_wall, current_cpu), (base_wall, base_cpu) = means["current"], means[f"@{args.baseline_ref}"]
    print(f"\nmeans over {args.rounds} rounds: current {current_wall:.1f} s wall, {current_cpu:.1f} s CPU; "
          f"@{args.baseline_ref} {base_wall:.1f} s, {base_cpu:.1f} s: {base_wall / current_wall:.2f}x faster wall, "
          f"{base_cpu / current_cpu:.2f}x less CPU")
    shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Eval runner throughput vs the ideal ``concurrency / latency`` on a loopback server.

A loopback OpenAI-compatible server runs in its own process and answers every request after a
fixed latency (default 50 ms), so a perfect client with C requests in flight completes C / 0.05
requests per second. The server is `benchmarks/latency_server.py` (httptools, almost no CPU per
request: the stand-in for a model server on its own host); ``--server scripted`` uses the test
suite's aiohttp server instead (~0.2 ms of CPU per request taken from the client's share). Timed per C:

* client: ``OpenAICompatClient.chat`` alone, C coroutines in a loop (the HTTP + limiter path);
* runner: the whole ``mmbu eval run`` pipeline (release streaming, prompts, image preparation,
  request hashing, records appended and fsynced) on a generated release, with 1 and 2 ``--workers``;
  *whole run* counts from the call to its return (start-up included: reading the release,
  spawning workers), *steady* is answers / (last answer - first request sent), from the records;
* ceiling: the client against a second server with no latency at the same concurrency, i.e.
  what the machine's CPUs allow when client and server share them (2 cores here): above it no
  client can go, whatever the latency.

Run by hand: ``.venv/bin/python benchmarks/eval_runner.py [--latency 0.05] [--levels 16,64,256] [--rounds 100]
[--workers 1,2] [--image-size 64x48] [--model NAME] [--server lean|scripted]``.
``--baseline-ref REF`` also times the single-process runner of ``benchmark_eval/runner/core.py`` as it
was at git REF, alternately with the current one (before/after comparisons on a shared machine).
"""
from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from mmbu.benchmark_eval.backends import OpenAICompatBackend, OpenAICompatClient  # noqa: E402
from mmbu.benchmark_eval.models import default_registry  # noqa: E402
from mmbu.benchmark_eval.records import iter_records  # noqa: E402
from mmbu.benchmark_eval.runner import RunConfig, Runner  # noqa: E402
from mmbu.benchmark_eval.runner.workers import OpenAIBackendRecipe, run_sharded  # noqa: E402
from support.eval_release import write_release  # noqa: E402

MESSAGES = [{"role": "user", "content": "Reply with one letter.\nA. nucleus\nB. platelet"}]


SERVERS = {"lean": ROOT / "benchmarks/latency_server.py", "scripted": ROOT / "tests/support/openai_server.py"}


def _ahead_of_the_client() -> None:
    # A model server on its own host answers on time however busy the client is; sharing this
    # machine's cores, the stand-in gets a higher scheduling priority to come closer to that.
    # Unprivileged users cannot raise priority: then it runs at the default one.
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -10)
    except OSError:
        pass


def start_server(latency: float, kind: str = "lean") -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([sys.executable, str(SERVERS[kind]), "--latency", str(latency)],
                               stdout=subprocess.PIPE, text=True, preexec_fn=_ahead_of_the_client)
    url = process.stdout.readline().strip()
    if not url.startswith("http"):
        process.kill()
        raise SystemExit("the loopback server did not start")
    return process, url


async def client_throughput(url: str, concurrency: int, total: int) -> float:
    async with OpenAICompatClient(url, "loopback", concurrency=concurrency) as client:
        await asyncio.gather(*(client.chat(MESSAGES, max_tokens=8) for _ in range(concurrency)))  # warm connections
        remaining = total

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                await client.chat(MESSAGES, max_tokens=8)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return total / (time.perf_counter() - started)


def runner_at(ref: str, scratch: Path) -> type[Runner]:
    """The `Runner` class of runner/core.py at git `ref`, loaded beside the current one."""
    source = subprocess.run(["git", "show", f"{ref}:benchmark_eval/runner/core.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    path = scratch / "core_baseline.py"
    path.write_text(source)
    name = "mmbu.benchmark_eval.runner.core_baseline"  # inside the package, so its relative imports resolve
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.Runner


def runner_throughput(url: str, concurrency: int, release: Path, runs: Path,
                      runner_class: type[Runner] = Runner, workers: int = 1,
                      model: str = "Qwen/Qwen3-VL-8B-Instruct") -> tuple[float, float, int]:
    """(whole-run req/s, steady req/s, answers). *Whole run* includes start-up (reading the release,
    spawning workers); *steady* is answers / (last answer - first request sent), from the records."""
    entry = default_registry().get(model)
    config = RunConfig(release_dir=release, runs_dir=runs, entry=entry, tasks=("ungrounded_classification",),
                       forms=("closed", "open"), templates=("no_context", "modality", "full_context"),
                       concurrency=concurrency, max_tokens=8)

    async def one_process():
        backend = OpenAICompatBackend(OpenAICompatClient(url, entry.served_name, concurrency=concurrency), entry.chat)
        try:
            return await runner_class(config, backend).run()
        finally:
            await backend.aclose()

    started = time.perf_counter()
    if workers == 1:
        outcome = asyncio.run(one_process())
    else:
        outcome = run_sharded(config, OpenAIBackendRecipe((url,), entry.served_name, None, quirks=entry.chat), workers)
    elapsed = time.perf_counter() - started
    records = [r for r in iter_records(config.predictions) if r.status == "ok"]
    first_sent = min(r.created_at - r.latency_s for r in records)
    last_answer = max(r.created_at for r in records)
    ok = outcome.progress.ok
    return ok / elapsed, ok / (last_answer - first_sent), ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--levels", default="16,64,256")
    parser.add_argument("--rounds", type=int, default=100, help="requests per level = rounds x concurrency")
    parser.add_argument("--server", choices=sorted(SERVERS), default="lean")
    parser.add_argument("--image-size", default="64x48",
                        help="WxH of the release images (64x48: the runner's own cost; larger: image preparation too)")
    parser.add_argument("--model", default="Qwen/Qwen3-VL-8B-Instruct",
                        help="registry entry: its image limits decide whether images are resized and re-encoded")
    parser.add_argument("--workers", default="1,2", help="runner processes to time, comma-separated (--workers of mmbu eval run)")
    parser.add_argument("--baseline-ref", help="also time the runner of this git ref (runner/core.py), alternately")
    args = parser.parse_args()
    process, url = start_server(args.latency, args.server)
    instant, instant_url = start_server(0.0, args.server)
    load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    print(f"{args.server} server {url}, latency {args.latency * 1000:.0f} ms, {os.cpu_count()} cores, load average {load}; "
          f"{args.model}, {args.image_size} images")
    worker_counts = [int(v) for v in args.workers.split(",")]
    size = tuple(int(v) for v in args.image_size.lower().split("x"))
    print("| in flight | ideal req/s | CPU ceiling req/s | client req/s | client/ideal | runner workers | runner req/s "
          "(whole run) | whole/ideal | runner req/s (steady) | steady/ideal | requests |"
          + (" baseline runner req/s | baseline/ideal |" if args.baseline_ref else ""))
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if args.baseline_ref else ""))
    try:
        with tempfile.TemporaryDirectory() as scratch:
            baseline = runner_at(args.baseline_ref, Path(scratch)) if args.baseline_ref else None
            for index, level in enumerate(int(v) for v in args.levels.split(",")):
                ideal = level / args.latency
                total = level * args.rounds
                ceiling = asyncio.run(client_throughput(instant_url, level, total))
                client = asyncio.run(client_throughput(url, level, total))
                rows = -(-total // 6)
                release = write_release(Path(scratch) / f"release-{level}", tasks=("ungrounded_classification",),
                                        count=rows, size=size)
                timed = [(f"w{n}", Runner, n) for n in worker_counts]
                timed += [("base", baseline, 1)] if baseline is not None else []
                if index % 2:  # the runner timed second in a pair gains a few points: swap the order each level
                    timed.reverse()
                results = {tag: runner_throughput(url, level, release, Path(scratch) / f"{tag}-{level}", runner_class,
                                                  workers, args.model) for tag, runner_class, workers in timed}
                before = results["base"][1] if baseline is not None else None
                extra = f" {before:.0f} | {before / ideal:.0%} |" if before is not None else ""
                for workers in worker_counts:
                    whole, steady, asked = results[f"w{workers}"]
                    print(f"| {level} | {ideal:.0f} | {ceiling:.0f} | {client:.0f} | {client / ideal:.0%} | {workers} | "
                          f"{whole:.0f} | {whole / ideal:.0%} | {steady:.0f} | {steady / ideal:.0%} | {asked} |{extra}",
                          flush=True)
    finally:
        for server in (process, instant):
            server.terminate()
            server.wait(timeout=10)


if __name__ == "__main__":
    main()

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
  client can go, whatever the latency;
* bare client, same bodies (with ``--baseline-ref`` or large images): the client alone sending, at the same
  concurrency to the same server, request bodies carrying one image of the release prepared for the model
  (built once): no reading, decoding, resizing or encoding. On a machine whose cores the server shares,
  no runner that sends those bytes can go faster.

*server ms per answer* is the loopback server's own CPU (from /proc) per answer of that run, reported
apart from the runner's: a model server on its own host would not take it from the client, here it does.

Run by hand: ``.venv/bin/python benchmarks/eval_runner.py [--latency 0.05] [--levels 16,64,256] [--rounds 100]
[--workers 1,2] [--image-size 64x48] [--model NAME] [--server lean|scripted]``.
``--baseline-ref REF`` also times the runner as it was at git REF (the whole ``benchmark_eval`` package
of that commit, extracted with ``git archive`` and put first on the package path, in worker processes too),
with the same worker counts, alternately with the current one, ``--repeat`` times (before/after
comparisons on a shared machine). Each runner variant runs in a child process of its own; its CPU time
(user + system, workers included) per answer is the steadier figure when the machine is loaded.
``--image-cache`` adds the current runner with ``mmbu eval run --image-cache``: a cold run filling an empty
cache, then a warm run reading it (what a resumed run or a second model with the same image limits gets).
``--stages`` prints the CPU ms per row of each step of a row's image.
"""
from __future__ import annotations

import os
import sys

if os.environ.get("MMBU_EVAL_SHADOW"):
    # A runner from an earlier commit: its package is found before the installed one. Set at the top,
    # so that spawned worker processes (which import this file as their main module) see it too.
    import mmbu.benchmark_eval

    mmbu.benchmark_eval.__path__.insert(0, os.environ["MMBU_EVAL_SHADOW"])

import argparse
import asyncio
import hashlib
import io
import json
import resource
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from mmbu.benchmark_eval.backends import OpenAICompatBackend, OpenAICompatClient  # noqa: E402
from mmbu.benchmark_eval.backends.base import ModelRequest  # noqa: E402
from mmbu.benchmark_eval.models import default_registry  # noqa: E402
from mmbu.benchmark_eval.records import iter_records  # noqa: E402
from mmbu.benchmark_eval.release import iter_images  # noqa: E402
from mmbu.benchmark_eval.runner import RunConfig, Runner  # noqa: E402
from mmbu.benchmark_eval.backends.recipe import BackendRecipe  # noqa: E402
from mmbu.benchmark_eval.runner.workers import run_sharded  # noqa: E402
from mmbu.benchmark_eval.tasks.images import prepare_image  # noqa: E402
from support.eval_release import write_release  # noqa: E402

MESSAGES = [{"role": "user", "content": "Reply with one letter.\nA. nucleus\nB. platelet"}]


SAME_BODY = "bare client, same bodies"
CACHE_COLD, CACHE_WARM = "current, image cache cold", "current, image cache warm"
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


def same_body_throughput(url: str, concurrency: int, total: int, release: Path, model: str) -> dict:
    """The bare client sending `total` requests whose body carries the release's first image as the runner
    prepares it for `model` (prepared once): req/s and this process's CPU ms per request."""
    entry = default_registry().get(model)
    first = next(iter_images(release, "ungrounded_classification"))
    prepared = prepare_image(first.image, entry)
    request = ModelRequest(request_id="bench", prompt=MESSAGES[0]["content"], image=prepared.data,
                           image_mime=prepared.mime, image_url_json=prepared.url_json, max_tokens=8)

    async def send() -> float:
        backend = OpenAICompatBackend(OpenAICompatClient(url, entry.served_name, concurrency=concurrency), entry.chat)
        try:
            await asyncio.gather(*(backend.generate(request) for _ in range(concurrency)))  # warm connections
            remaining = total

            async def worker() -> None:
                nonlocal remaining
                while remaining > 0:
                    remaining -= 1
                    await backend.generate(request)

            started = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            return total / (time.perf_counter() - started)
        finally:
            await backend.aclose()

    before = resource.getrusage(resource.RUSAGE_SELF)
    rate = asyncio.run(send())
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {"whole": rate, "steady": rate, "asked": total + concurrency, "cpu_ms": cpu / (total + concurrency) * 1000,
            "peak_mib": float("nan")}


def stage_costs(release: Path, model: str, tries: int = 7) -> dict[str, float]:
    """CPU ms (process time, best of `tries`) of each step a row's image goes through in the runner, on the
    release's first image: the per-row costs that six answers share."""
    from PIL import Image

    from mmbu.benchmark_eval.tasks.images import PreparedImage, _as_is, encode_png_fast, plan_frames

    entry = default_registry().get(model)
    png = next(iter_images(release, "ungrounded_classification")).image

    def best(step) -> float:
        times = []
        for _ in range(tries):
            started = time.process_time()
            step()
            times.append(time.process_time() - started)
        return min(times) * 1000

    decoded = Image.open(io.BytesIO(png))
    decoded.load()
    frames = plan_frames(decoded.size, entry)
    resized = decoded.convert("RGB").resize(frames.content_size, Image.Resampling.BICUBIC)
    prepared = prepare_image(png, entry)
    costs = {
        "sha256 of the release PNG (request hash)": best(lambda: hashlib.sha256(png).hexdigest()),
        "PNG header and as-is check": best(lambda: _as_is(png, entry)),
        "decode (Pillow)": best(lambda: Image.open(io.BytesIO(png)).load()),
        "to RGB + resize (Pillow bicubic)": best(lambda: decoded.convert("RGB").resize(frames.content_size, Image.Resampling.BICUBIC)),
        "PNG encode (libpng, zlib 1, RLE, Sub)": best(lambda: encode_png_fast(resized)),
        "data URL as JSON (base64)": best(lambda: PreparedImage(prepared.data, prepared.mime, prepared.frames).url_json),
    }
    costs["whole prepare_image + data URL"] = best(lambda: prepare_image(png, entry).url_json)
    return costs


def server_cpu_s(process: subprocess.Popen) -> float:
    """user + system seconds the server process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def extract_baseline(ref: str, scratch: Path) -> Path:
    """`benchmark_eval/` as of git `ref` into `scratch/mmbu@REF/benchmark_eval`."""
    target = scratch / f"mmbu@{ref}"
    target.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "benchmark_eval"], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target / "benchmark_eval"


def timed_in_child(shadow: Path | None, **arguments) -> dict:
    """`runner_throughput(**arguments)` in a child process (the runner of `shadow`, else the current one)."""
    env = dict(os.environ, MMBU_EVAL_SHADOW=str(shadow) if shadow else "")
    done = subprocess.run([sys.executable, __file__, "--child", json.dumps(arguments, default=str)], env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the runner child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def child(arguments: dict) -> None:
    started = resource.getrusage(resource.RUSAGE_SELF)
    whole, steady, asked = runner_throughput(arguments["url"], arguments["concurrency"], Path(arguments["release"]),
                                             Path(arguments["runs"]), workers=arguments["workers"],
                                             model=arguments["model"], image_cache=arguments.get("image_cache"))
    cpu = sum(getattr(resource.getrusage(who), field) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
              for field in ("ru_utime", "ru_stime")) - started.ru_utime - started.ru_stime
    peak = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    print(json.dumps({"whole": whole, "steady": steady, "asked": asked, "cpu_ms": cpu / asked * 1000,
                      "peak_mib": peak / 1024}))


def runner_throughput(url: str, concurrency: int, release: Path, runs: Path, workers: int = 1,
                      model: str = "Qwen/Qwen3-VL-8B-Instruct", image_cache: str | None = None) -> tuple[float, float, int]:
    """(whole-run req/s, steady req/s, answers). *Whole run* includes start-up (reading the release,
    spawning workers); *steady* is answers / (last answer - first request sent), from the records."""
    entry = default_registry().get(model)
    config = RunConfig(release_dir=release, runs_dir=runs, entry=entry, tasks=("ungrounded_classification",),
                       forms=("closed", "open"), templates=("no_context", "modality", "full_context"),
                       concurrency=concurrency, max_tokens=8,
                       **({"image_cache": Path(image_cache)} if image_cache else {}))  # runners before the cache lack it

    async def one_process():
        backend = OpenAICompatBackend(OpenAICompatClient(url, entry.served_name, concurrency=concurrency), entry.chat)
        try:
            return await Runner(config, backend).run()
        finally:
            await backend.aclose()

    started = time.perf_counter()
    if workers == 1:
        outcome = asyncio.run(one_process())
    else:
        outcome = run_sharded(config, BackendRecipe("openai", entry, (url,), entry.served_name, None), workers)
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
    parser.add_argument("--grey", action="store_true", help="8-bit grey release images instead of RGB")
    parser.add_argument("--model", default="Qwen/Qwen3-VL-8B-Instruct",
                        help="registry entry: its image limits decide whether images are resized and re-encoded")
    parser.add_argument("--workers", default="1,2", help="runner processes to time, comma-separated (--workers of mmbu eval run)")
    parser.add_argument("--baseline-ref", help="also time the runner of this git ref (benchmark_eval/), alternately")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each runner variant per level (alternating)")
    parser.add_argument("--skip-client", action="store_true", help="time the runners only (no bare-client rows)")
    parser.add_argument("--image-cache", action="store_true",
                        help="also time the current runner with --image-cache: a cold run (empty cache) then a warm one")
    parser.add_argument("--stages", action="store_true",
                        help="also print the CPU ms per row of each image step (sha256, decode, resize, encode, base64)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    process, url = start_server(args.latency, args.server)
    instant, instant_url = start_server(0.0, args.server)
    print(f"{args.server} server {url}, latency {args.latency * 1000:.0f} ms, {os.cpu_count()} cores, load average "
          f"{_load()}; {args.model}, {args.image_size} {'grey' if args.grey else 'RGB'} images")
    worker_counts = [int(v) for v in args.workers.split(",")]
    size = tuple(int(v) for v in args.image_size.lower().split("x"))
    print("| in flight | ideal req/s | CPU ceiling req/s | client req/s | runner | workers | run | req/s (whole run) "
          "| req/s (steady) | steady/ideal | CPU ms per answer | server ms per answer | peak RSS MiB | load |")
    print("|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    summary: list[str] = []
    try:
        with tempfile.TemporaryDirectory() as scratch:
            shadow = extract_baseline(args.baseline_ref, Path(scratch)) if args.baseline_ref else None
            for index, level in enumerate(int(v) for v in args.levels.split(",")):
                ideal = level / args.latency
                total = level * args.rounds
                ceiling = client = float("nan")
                if not args.skip_client:
                    ceiling = asyncio.run(client_throughput(instant_url, level, total))
                    client = asyncio.run(client_throughput(url, level, total))
                release = write_release(Path(scratch) / f"release-{level}", tasks=("ungrounded_classification",),
                                        count=-(-total // 6), size=size, grey=args.grey)
                if args.stages:
                    for step, ms in stage_costs(release, args.model).items():
                        summary.append(f"{size[0]}x{size[1]} per row, {step}: {ms:.2f} ms")
                variants = [("current", None, n) for n in worker_counts]
                variants += [(f"@{args.baseline_ref}", shadow, n) for n in worker_counts] if shadow else []
                if shadow or size[0] * size[1] > 256 * 256:
                    variants.append((SAME_BODY, None, 1))
                if args.image_cache:  # a fresh cache filled by the first run, read by the second
                    variants += [(tag, None, n) for n in worker_counts for tag in (CACHE_COLD, CACHE_WARM)]
                results: dict[tuple[str, int], list[dict]] = {}
                for repeat in range(args.repeat):
                    order = variants if (index + repeat) % 2 == 0 else variants[::-1]  # the second of a pair gains a little
                    order = _cold_before_warm(order)
                    for tag, tree, workers in order:
                        runs = Path(scratch) / f"runs-{level}-{tag}-{workers}-{repeat}"
                        server_before = server_cpu_s(process)
                        cache = Path(scratch) / f"cache-{level}-{workers}-{repeat}" if tag in (CACHE_COLD, CACHE_WARM) else None
                        if tag == SAME_BODY:
                            measured = same_body_throughput(url, level, total, release, args.model)
                        else:
                            measured = timed_in_child(tree, url=url, concurrency=level, release=str(release),
                                                      runs=str(runs), workers=workers, model=args.model,
                                                      image_cache=str(cache) if cache else None)
                        server_ms = (server_cpu_s(process) - server_before) / measured["asked"] * 1000
                        results.setdefault((tag, workers), []).append(measured)
                        print(f"| {level} | {ideal:.0f} | {ceiling:.0f} | {client:.0f} | {tag} | {workers} | {repeat + 1} | "
                              f"{measured['whole']:.1f} | {measured['steady']:.1f} | {measured['steady'] / ideal:.1%} | "
                              f"{measured['cpu_ms']:.2f} | {server_ms:.2f} | {measured['peak_mib']:.0f} | {_load()} |",
                              flush=True)
                if shadow:
                    for workers in worker_counts:
                        new, old = results[("current", workers)], results[(f"@{args.baseline_ref}", workers)]
                        ratios = [n["steady"] / o["steady"] for n, o in zip(new, old)]
                        cpu = [o["cpu_ms"] / n["cpu_ms"] for n, o in zip(new, old)]
                        summary.append(f"{level} in flight, {workers} worker(s): steady req/s current / @{args.baseline_ref} "
                                       f"median {statistics.median(ratios):.2f}x (runs {', '.join(f'{r:.2f}' for r in ratios)}); "
                                       f"CPU per answer @{args.baseline_ref} / current median {statistics.median(cpu):.2f}x")
                        for tag in (CACHE_COLD, CACHE_WARM):
                            if (tag, workers) in results:  # a warm cache is a later run's figure, never the first one's
                                cached = [c["steady"] / o["steady"] for c, o in zip(results[(tag, workers)], old)]
                                summary.append(f"{level} in flight, {workers} worker(s): {tag} / @{args.baseline_ref} "
                                               f"median {statistics.median(cached):.2f}x (runs {', '.join(f'{r:.2f}' for r in cached)})")
                        if (SAME_BODY, 1) in results:  # what no runner sending these bodies here could exceed
                            bound = [b["steady"] / o["steady"] for b, o in zip(results[(SAME_BODY, 1)], old)]
                            summary.append(f"{level} in flight, {workers} worker(s): {SAME_BODY} / @{args.baseline_ref} "
                                           f"median {statistics.median(bound):.2f}x (runs {', '.join(f'{r:.2f}' for r in bound)})")
    finally:
        for server in (process, instant):
            server.terminate()
            server.wait(timeout=10)
    for line in summary:
        print(line)


def _cold_before_warm(order: list[tuple]) -> list[tuple]:
    """`order` with each warm-cache run moved right after its cold run (which fills that cache)."""
    cold_warm = [v for v in order if v[0] == CACHE_WARM]
    ordered = [v for v in order if v[0] != CACHE_WARM]
    for warm in cold_warm:
        ordered.insert(ordered.index((CACHE_COLD, None, warm[2])) + 1, warm)
    return ordered


def _load() -> str:
    return Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"


if __name__ == "__main__":
    main()

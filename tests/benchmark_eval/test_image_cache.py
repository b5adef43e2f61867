"""Prepared images kept on disk (`--image-cache`): reused across runs and models that prepare alike, with the
pixels the model would get without the cache, and never trusted when damaged."""
from __future__ import annotations

import hashlib
import io
import os
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from support.eval_release import write_release
from click.testing import CliRunner
from PIL import Image
from support.openai_server import OpenAIServer

from mmbu.benchmark_eval.models import default_registry
from mmbu.benchmark_eval.release import iter_images, load_samples
from mmbu.benchmark_eval.runner.api import EvalConfig, EvalUsageError, run_eval
from mmbu.benchmark_eval.runner.cli import run as run_command
from mmbu.benchmark_eval.tasks.image_cache import ImageCache, entry_key, prepare_cached
from mmbu.benchmark_eval.tasks.images import Frames, PreparedImage, prepare_image
from mmbu.core.cli import ExitCode

TASKS = ("ungrounded_classification", "box_grounded_classification", "mask_grounded_classification")
QWEN_7B, QWEN_3B = "Qwen/Qwen2.5-VL-7B-Instruct", "Qwen/Qwen2.5-VL-3B-Instruct"   # the same image limits


def sent_images(server) -> Counter:
    """How many requests carried each image, by the sha256 of its RGB pixels."""
    return Counter(hashlib.sha256(np.asarray(call.image().convert("RGB")).tobytes()).hexdigest() for call in server.calls)


def fresh_images(release: Path, model: str) -> Counter:
    """The same count for the images prepared without any cache, straight from the release."""
    entry, counts = default_registry().get(model), Counter()
    for task in TASKS:
        rows = load_samples(release, task).set_index("sample_id")
        for item in iter_images(release, task):
            boxes = [[float(v) for v in box] for box in rows.loc[item.sample_id, "boxes"]] if task.startswith("box") else None
            mask = item.mask if task.startswith("mask") else None
            prepared = prepare_image(item.image, entry, boxes=boxes, mask_png=mask)
            pixels = np.asarray(Image.open(io.BytesIO(prepared.data)).convert("RGB"))
            counts[hashlib.sha256(pixels.tobytes()).hexdigest()] += 6
    return counts


def run(release, runs, model, server, cache, workers=1):
    config = EvalConfig(release_dir=release, runs_dir=runs, model=model, base_urls=(server.url,), tasks=TASKS,
                        served_model_name="loopback", timeout=5, retry_backoff=0.01, image_cache=cache, workers=workers)
    return run_eval(config)


def entries(cache: Path) -> dict[Path, tuple[int, bytes]]:
    return {path: (path.stat().st_mtime_ns, path.read_bytes()) for path in sorted(cache.rglob("*.bin"))}


def test_a_second_model_with_the_same_limits_reuses_every_image_and_sends_the_same_pixels(tmp_path):
    release = write_release(tmp_path / "release", tasks=TASKS, count=3, size=(400, 300))
    cache = tmp_path / "cache"
    with OpenAIServer() as first:
        assert run(release, tmp_path / "runs", QWEN_7B, first, cache).exit_code == ExitCode.OK
    stored = entries(cache)
    assert len(stored) == 3 * 3                                # one entry per row (image + its ROI), not per request
    # damage one entry: it must be prepared again and rewritten, never sent as it is
    damaged, (_, original) = next(iter(stored.items()))
    damaged.write_bytes(original[:-10] + bytes(10))
    with OpenAIServer() as second:
        # in two worker processes, which share the directory
        assert run(release, tmp_path / "runs", QWEN_3B, second, cache, workers=2).exit_code == ExitCode.OK
    after = entries(cache)
    assert after.keys() == stored.keys() and after[damaged][1] == original
    assert all(after[path][0] == stored[path][0] for path in stored if path != damaged)  # the rest were only read
    # the second model's requests carry, pixel for pixel, what the first model's did and what preparing
    # each row's image without a cache gives (outlines included)
    assert len(first.calls) == len(second.calls) == 3 * 3 * 6
    assert sent_images(second) == sent_images(first) == fresh_images(release, QWEN_3B)


def test_a_cached_image_has_the_pixels_and_frames_of_a_fresh_one(tmp_path):
    release = write_release(tmp_path / "release", tasks=("box_grounded_classification",), count=1, size=(640, 480))
    row = load_samples(release, "box_grounded_classification").iloc[0]
    png = next(iter_images(release, "box_grounded_classification")).image
    entry = default_registry().get(QWEN_7B)
    boxes = [[float(v) for v in box] for box in row["boxes"]]
    fresh = prepare_image(png, entry, boxes=boxes)
    cache = ImageCache(tmp_path / "cache")
    first = prepare_cached(cache, png, entry, image_sha256="a" * 64, mask_sha256=None, boxes=boxes)
    again = prepare_cached(cache, png, entry, image_sha256="a" * 64, mask_sha256=None, boxes=boxes)
    assert (cache.misses, cache.hits) == (1, 1)
    assert again.data == first.data == fresh.data and again.frames == fresh.frames and again.mime == fresh.mime
    assert fresh.frames.sent_size != fresh.frames.image_size   # a resized image: the cache saved real work
    # an entry planned otherwise than this image and model now plan is not used (and is replaced)
    other = Frames(fresh.frames.image_size, (10, 10), (10, 10))
    cache.put(entry_key(entry, "a" * 64, None, boxes), PreparedImage(b"not these pixels", "image/png", other))
    again = prepare_cached(cache, png, entry, image_sha256="a" * 64, mask_sha256=None, boxes=boxes, frames=fresh.frames)
    assert again.data == fresh.data and again.frames == fresh.frames
    assert prepare_cached(cache, png, entry, image_sha256="a" * 64, mask_sha256=None, boxes=boxes,
                          frames=fresh.frames).data == fresh.data and cache.hits == 2


def test_the_key_follows_whatever_decides_the_bytes():
    registry = default_registry()
    qwen7, qwen3, gemma, qwen3vl = (registry.get(n) for n in (QWEN_7B, QWEN_3B, "google/gemma-3-4b-it",
                                                              "Qwen/Qwen3-VL-8B-Instruct"))
    base = entry_key(qwen7, "a" * 64, None, None)
    assert entry_key(qwen3, "a" * 64, None, None) == base            # same limits, another model: shared
    assert entry_key(gemma, "a" * 64, None, None) != base            # other limits
    assert qwen3vl.image == qwen7.image and entry_key(qwen3vl, "a" * 64, None, None) != base  # no smart_resize
    assert entry_key(qwen7, "b" * 64, None, None) != base            # other image
    assert entry_key(qwen7, "a" * 64, "c" * 64, None) != base        # a mask outlined
    assert entry_key(qwen7, "a" * 64, None, [[1.0, 2.0, 3.0, 4.0]]) != entry_key(qwen7, "a" * 64, None, [[1.0, 2.0, 3.0, 5.0]])


def test_images_sent_unchanged_are_not_stored(tmp_path):
    release = write_release(tmp_path / "release", tasks=("ungrounded_classification",), count=1, size=(320, 240))
    png = next(iter_images(release, "ungrounded_classification")).image
    entry = default_registry().get("Qwen/Qwen3-VL-8B-Instruct")   # below its pixel cap: the release PNG as it is
    cache = ImageCache(tmp_path / "cache")
    assert prepare_cached(cache, png, entry, image_sha256="a" * 64, mask_sha256=None).data is png
    assert not list((tmp_path / "cache").rglob("*.bin"))


def test_a_cache_path_that_is_a_file_is_bad_usage(tmp_path):
    release = write_release(tmp_path / "release", tasks=("ungrounded_classification",), count=1)
    (tmp_path / "taken").write_text("x")
    with pytest.raises(EvalUsageError, match="--image-cache .*taken: cannot be created"):
        run_eval(EvalConfig(release_dir=release, runs_dir=tmp_path / "runs", model=QWEN_7B, base_urls=("http://127.0.0.1:9/v1",),
                            image_cache=tmp_path / "taken"))


def test_a_failed_write_only_costs_the_cache(tmp_path):
    release = write_release(tmp_path / "release", tasks=("ungrounded_classification",), count=1, size=(640, 480))
    png = next(iter_images(release, "ungrounded_classification")).image
    entry = default_registry().get(QWEN_7B)
    cache = ImageCache(tmp_path / "cache")
    key = entry_key(entry, "a" * 64, None, None)
    (tmp_path / "cache" / key[:2]).write_text("a file where the entry's folder would go")
    prepared = prepare_cached(cache, png, entry, image_sha256="a" * 64, mask_sha256=None)
    assert prepared.data == prepare_image(png, entry).data and cache.write_failures == 1
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [key[:2]]     # no temporary file left behind


@pytest.mark.parametrize("workers", ["1", "2"])
def test_the_command_says_how_many_images_it_reused_and_stored(tmp_path, workers):
    release = write_release(tmp_path / "release", tasks=("ungrounded_classification",), count=4, size=(640, 480))
    args = ["--release", str(release), "--model", QWEN_7B, "--served-model-name", "loopback", "--out",
            str(tmp_path / "runs"), "--image-cache", str(tmp_path / "cache"), "--workers", workers,
            "--timeout", "5", "--retry-backoff", "0.01"]
    with OpenAIServer() as server:
        first = CliRunner().invoke(run_command, [*args, "--base-url", server.url], catch_exceptions=False)
        again = CliRunner().invoke(run_command, [*args, "--base-url", server.url, "--max-tokens", "64"],
                                   catch_exceptions=False)   # another request: every row asked again
    assert first.exit_code == again.exit_code == 0, first.output
    assert "0 images reused, 4 prepared and stored" in " ".join(first.output.split())
    assert "4 images reused, 0 prepared and stored" in " ".join(again.output.split())


def test_a_killed_writes_temporaries_are_removed_by_a_later_run_once_a_day_old(tmp_path):
    """A run killed while it stored an entry leaves `.<key>.bin.<random>.tmp`; the next run removes those a day old
    and leaves younger ones, which may be another run's writes in progress, and every entry."""
    release = write_release(tmp_path / "release", tasks=TASKS, count=2, size=(400, 300))
    cache = tmp_path / "cache"
    with OpenAIServer() as server:
        assert run(release, tmp_path / "runs", QWEN_7B, server, cache).exit_code == ExitCode.OK
    stored = entries(cache)
    folder = next(iter(stored)).parent
    old, young = folder / ".0123.bin.aaaa0000.tmp", folder / ".4567.bin.bbbb1111.tmp"
    for path in (old, young):
        path.write_bytes(b"half an entry")
    day_and_a_minute_ago = time.time() - 24 * 3600 - 60
    os.utime(old, (day_and_a_minute_ago, day_and_a_minute_ago))
    with OpenAIServer() as server:
        assert run(release, tmp_path / "runs-again", QWEN_7B, server, cache).exit_code == ExitCode.OK
    assert not old.exists() and young.exists()
    assert entries(cache).keys() == stored.keys()

"""Ask a model every selected question of a release and append one run record per answer.

The pipeline: release rows stream in (a worker thread reads and hashes them in chunks); for each row the
prompts of every selected (form, template) are built and hashed; configurations whose key and
request hash already have an ``ok`` record are skipped (that is the resume); the image is
prepared once per row (resize, ROI, encode — in a worker thread unless it is a thumbnail) and
shared by its requests; ``concurrency`` askers send the ready requests; each answer becomes a
record, serialised at once, and a single writer appends and fsyncs them in groups at most four
times a second. Nothing is dropped: a request that gets no usable answer becomes an ``error``
record with its reason. `--workers` runs this in several processes (:mod:`.workers`): ``shard``
selects a process's rows and :meth:`Runner._open_writer` where its records go.
"""
from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmbu.benchmark_eval.backends.base import Backend, BackendError, ChatResult, ModelRequest
from mmbu.benchmark_eval.models.registry import ModelEntry
from mmbu.benchmark_eval.records import (RecordKey, RecordWriter, RunRecord, dump_record, iter_records,
                                         repair_truncated_tail)
from mmbu.benchmark_eval.release import SampleImages, iter_images, load_samples
from mmbu.benchmark_eval.tasks.image_cache import ImageCache, prepare_cached
from mmbu.benchmark_eval.tasks.images import (Frames, ImageTooLarge, ImageUnreadable, image_size_of, plan_frames,
                                              prepare_image)
from mmbu.benchmark_eval.tasks.prompts import PROMPT_VERSION, Prompt, PromptError, build_prompt
from mmbu.benchmark_eval.tasks.spec import TASK_SPECS
from mmbu.core.release import FORMS, TEMPLATES
from mmbu.core.runs import RunFile

TASKS_ORDER = tuple(TASK_SPECS)

WRITE_INTERVAL_S = 0.25   # least time between two appends (each one fsyncs)
READ_AHEAD_ROWS = 64      # release rows read per worker-thread hop ...
READ_AHEAD_BYTES = 16 << 20  # ... or fewer, once their images reach this size
INLINE_PREP_PIXELS = 128 * 128  # images this small are prepared on the event loop (~0.2 ms), larger in a thread


@dataclass
class RunConfig:
    release_dir: Path
    runs_dir: Path
    entry: ModelEntry
    tasks: tuple[str, ...]
    forms: tuple[str, ...]
    templates: tuple[str, ...]
    limit: int | None = None
    max_tokens: int = 512
    temperature: float = 0.0
    seed: int | None = 0
    concurrency: int = 32
    batch_size: int = 256          # for in-process backends (vLLM, transformers)
    shard: tuple[int, int] = (0, 1)  # (index, count): this process asks rows index, index + count, ...
    image_cache: Path | None = None  # prepared images kept here for later runs (tasks.image_cache)

    @property
    def run_dir(self) -> Path:
        return self.runs_dir / self.entry.slug

    @property
    def predictions(self) -> Path:
        return self.run_dir / RunFile.PREDICTIONS


@dataclass
class Progress:
    """Counters the CLI shows; `on_change` is called after every update."""

    expected: int = 0
    skipped: int = 0
    ok: int = 0
    error: int = 0
    retries: int = 0                 # filled by worker processes (one process: the client counts them)
    prompt_tokens: int = 0           # from the answers' usage fields
    completion_tokens: int = 0
    reasons: Counter = field(default_factory=Counter)
    on_change: Callable[[Progress], None] | None = None
    first_answer: float | None = None   # time.monotonic() of the first answer: rates leave start-up out
    images_reused: int = 0           # --image-cache: images read from the cache / prepared and stored
    images_stored: int = 0

    @property
    def done(self) -> int:
        return self.skipped + self.ok + self.error

    def add(self, record: RunRecord) -> None:
        self.count(record.status, record.error_reason, record.usage)

    def count(self, status: str, reason: str | None, usage: dict[str, Any] | None = None) -> None:
        if self.first_answer is None:
            self.first_answer = time.monotonic()
        if status == "ok":
            self.ok += 1
        else:
            self.error += 1
            self.reasons[reason or "unknown"] += 1
        if usage:
            self.prompt_tokens += _tokens(usage, "prompt_tokens")
            self.completion_tokens += _tokens(usage, "completion_tokens")
        if self.on_change:
            self.on_change(self)

    def rates(self, now: float | None = None) -> tuple[float, float, float | None]:
        """(answers/s, tokens/s in + out, seconds left) since the first answer; ETA None until known."""
        if self.first_answer is None:
            return 0.0, 0.0, None
        elapsed = max((now or time.monotonic()) - self.first_answer, 1e-6)
        answered = self.ok + self.error
        per_s = answered / elapsed
        left = max(self.expected - self.done, 0)
        eta = left / per_s if per_s > 0 and answered >= 2 else None
        return per_s, (self.prompt_tokens + self.completion_tokens) / elapsed, eta


def _tokens(usage: dict[str, Any], name: str) -> int:
    value = usage.get(name)
    return value if isinstance(value, int) and value > 0 else 0


@dataclass
class RunOutcome:
    expected: dict[RecordKey, str]            # key -> the request hash this run expects
    progress: Progress
    truncated_tail: str | None = None


class RunLocked(Exception):
    """Another `mmbu eval run` is writing to the same run directory."""


@contextlib.contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """An exclusive lock on the run directory, so two runs never interleave their appends."""
    path = run_dir / RunFile.LOCK
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunLocked(f"{run_dir}: another `mmbu eval run` is writing here; wait for it or stop it") from None
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


# Chat fields that only tell the parser how to read answers: they shape no request, so they stay out
# of the request hash (and adding them left the hashes of earlier runs unchanged).
PARSE_ONLY_CHAT_FIELDS = {"thinking_prefilled"}


def model_fingerprint(entry: ModelEntry) -> str:
    """sha256 of what about the model shapes a request: name, served name, revision, image limits,
    box convention and chat quirks (computed once per run)."""
    payload = {"model": entry.name, "served": entry.served_name, "revision": entry.revision,
               "box_format": entry.box_format.model_dump(mode="json"), "image_limits": entry.image.model_dump(mode="json"),
               "chat": entry.chat.model_dump(mode="json", exclude=PARSE_ONLY_CHAT_FIELDS)}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def request_hash(model: str, prompt: Prompt | None, *, image_sha256: str, mask_sha256: str | None,
                 boxes: Any, generation: dict[str, Any], config_key: tuple[str, str, str]) -> str:
    """sha256 of everything that determines the request (`model` is :func:`model_fingerprint`);
    a change in any of it re-asks the model on resume."""
    payload = {
        "prompt_version": PROMPT_VERSION, "model": model,
        "system": prompt.system if prompt else None, "prompt": prompt.text if prompt else None,
        "image_sha256": image_sha256, "mask_sha256": mask_sha256, "boxes": boxes,
        "generation": generation, "config": config_key,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def completed_ok(records: Iterable[RunRecord]) -> set[tuple[RecordKey, str]]:
    return {(r.key, r.request_hash) for r in records if r.status == "ok"}


def _boxes(row: dict[str, Any]) -> list[list[float]] | None:
    boxes = row.get("boxes")
    if boxes is None:
        return None
    return [[float(v) for v in box] for box in boxes]


class Runner:
    def __init__(self, config: RunConfig, backend: Backend, progress: Progress | None = None, *,
                 take_lock: bool = True) -> None:
        self.config = config
        self.take_lock = take_lock
        self.backend = backend
        self.progress = progress or Progress()
        self.expected: dict[RecordKey, str] = {}
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()   # records as JSON lines
        self._generation = {"temperature": config.temperature, "max_tokens": config.max_tokens, "seed": config.seed}
        self._pending: set[asyncio.Task] = set()
        self._failure: BaseException | None = None
        self._batch_lock = asyncio.Lock()
        self._closing = asyncio.Event()
        self._box_format = config.entry.box_format.model_dump(mode="json")
        self._fingerprint = model_fingerprint(config.entry)
        self._admit: asyncio.Semaphore | None = None
        self.image_cache = ImageCache(config.image_cache) if config.image_cache is not None else None

    # -- records ----------------------------------------------------------------------------
    def _record(self, sample_id: str, task: str, form: str, template: str, rhash: str, frames: Frames | None,
                image_size: tuple[int, int] | None = None, **fields: Any) -> RunRecord:
        return RunRecord(
            sample_id=sample_id, task=task, form=form, template=template, model=self.config.entry.name,
            prompt_version=PROMPT_VERSION, request_hash=rhash,
            image_size=frames.image_size if frames else image_size, sent_size=frames.sent_size if frames else None,
            content_size=frames.content_size if frames else None,
            content_offset=frames.content_offset if frames and frames.content_offset != (0, 0) else None,
            box_format=self._box_format, backend=self.backend.name,
            created_at=time.time(), **fields,
        )

    def _emit(self, record: RunRecord) -> None:
        # Serialised here, a few microseconds per answer, so that the writer thread only does
        # syscalls: serialising a whole group there held the GIL for milliseconds at a time and
        # delayed every answer waiting on the event loop.
        self._queue.put_nowait(dump_record(record))
        self.progress.add(record)

    def _from_answer(self, answer: ChatResult | BackendError, base: dict[str, Any]) -> RunRecord:
        if isinstance(answer, BackendError):
            return self._record(**base, status="error", error=str(answer), error_reason=answer.reason,
                                latency_s=round(answer.latency_s, 4), attempts=answer.attempts)
        common = dict(latency_s=round(answer.latency_s, 4), attempts=answer.attempts,
                      finish_reason=answer.finish_reason, usage=answer.usage)
        if answer.is_refusal:
            return self._record(**base, status="error", error_reason="refused",
                                error=f"the model refused to answer: {answer.refusal}", **common)
        if answer.is_empty:
            budget = " (finish_reason=length: the token budget ran out, raise --max-tokens)" \
                if answer.finish_reason == "length" else ""
            return self._record(**base, status="error", error_reason="empty_answer",
                                error=f"the model returned an empty answer{budget}", **common)
        return self._record(**base, status="ok", output=answer.text, **common)

    async def _writer(self, writer: RecordWriter) -> None:
        # Answers arrive one by one; appending each group as soon as it exists meant an fsync and
        # a thread hop every few answers. Groups are instead at least WRITE_INTERVAL_S apart, so a
        # run fsyncs a few times a second whatever its concurrency. A killed run loses at most
        # that much of answers, which resume re-asks (nothing half-written reaches the file).
        last_write = -float("inf")
        while True:
            batch = [await self._queue.get()]
            wait = WRITE_INTERVAL_S - (time.monotonic() - last_write)
            if wait > 0 and batch[0] is not None and not self._closing.is_set():
                with contextlib.suppress(TimeoutError):  # the end of the run cuts the wait short
                    await asyncio.wait_for(self._closing.wait(), wait)
            while not self._queue.empty():
                batch.append(self._queue.get_nowait())
            lines = b"".join(line for line in batch if line is not None)
            if lines:
                await asyncio.to_thread(writer.write_lines, lines)
                last_write = time.monotonic()
            if None in batch:
                return

    def _open_writer(self) -> RecordWriter:
        """Where records go (a worker process sends them to its parent instead)."""
        return RecordWriter(self.config.predictions)

    # -- work -------------------------------------------------------------------------------
    async def run(self) -> RunOutcome:
        config = self.config
        config.run_dir.mkdir(parents=True, exist_ok=True)
        if not self.take_lock:  # the caller holds run_lock(config.run_dir) already
            return await self._run_locked()
        with run_lock(config.run_dir):
            return await self._run_locked()

    async def _run_locked(self) -> RunOutcome:
        config = self.config
        truncated = repair_truncated_tail(config.predictions)
        done = completed_ok(iter_records(config.predictions))
        tables = {}
        for task in config.tasks:
            spec = TASK_SPECS[task]
            frame = load_samples(config.release_dir, task, columns=spec.columns, optional=spec.optional_columns)
            if config.limit is not None:
                frame = frame.head(config.limit)
            index, count = config.shard
            tables[task] = frame.iloc[index::count] if count > 1 else frame
        self.progress.expected = sum(len(t) for t in tables.values()) * len(config.forms) * len(config.templates)
        with self._open_writer() as writer:
            writer_task = asyncio.create_task(self._writer(writer))
            try:
                for task, table in tables.items():
                    await self._run_task(task, table, done)
            finally:
                self._closing.set()
                self._queue.put_nowait(None)
                await writer_task
        if self.image_cache is not None:
            self.progress.images_reused, self.progress.images_stored = self.image_cache.hits, self.image_cache.stored
        return RunOutcome(self.expected, self.progress, truncated)

    async def _run_task(self, task: str, table: Any, done: set[tuple[RecordKey, str]]) -> None:
        rows = {row["sample_id"]: row for row in table.to_dict("records")}
        if not rows:
            return
        images = iter_images(self.config.release_dir, task, rows.keys())
        batch: list[tuple[ModelRequest, dict[str, Any]]] = []
        # `concurrency` askers each take the next ready request as soon as their answer is
        # recorded, the way a bare client loop does (a task per request waiting for a freed slot
        # sent the next request only after the whole burst of answers had been handled).
        ready: asyncio.Queue[tuple[ModelRequest, dict[str, Any]] | None] = asyncio.Queue()
        askers = [] if self.backend.prefers_batches else \
            [asyncio.create_task(self._asker(ready)) for _ in range(self.config.concurrency)]
        # Requests admitted (queued or in flight): `concurrency` plus the rows being prepared ahead.
        self._admit = None if self.backend.prefers_batches else asyncio.Semaphore(
            self.config.concurrency + self._prep_slots() * len(self.config.forms) * len(self.config.templates))
        try:
            await self._produce(task, rows, images, done, ready, batch)
            for _ in askers:
                await ready.put(None)
            await asyncio.gather(*askers)
        finally:
            for asker in askers:
                asker.cancel()
        self._raise_failure()
        if batch:
            await self._flush_batch(batch)

    async def _produce(self, task: str, rows: dict[str, dict[str, Any]], images: Iterator[SampleImages],
                       done: set[tuple[RecordKey, str]], ready: asyncio.Queue,
                       batch: list[tuple[ModelRequest, dict[str, Any]]]) -> None:
        prep = asyncio.Semaphore(self._prep_slots())  # rows being prepared (or waiting for admission) at once
        pending = self._pending
        # Rows come in chunks per worker-thread hop: one hop per row made the reader wait a loop turn
        # per row, and under hundreds of answers a turn is long enough to starve the askers.
        while chunk := await asyncio.to_thread(_take, images, READ_AHEAD_ROWS, READ_AHEAD_BYTES):
            for item in chunk:
                await prep.acquire()
                self._raise_failure()
                work = asyncio.create_task(self._row(task, rows[item.images.sample_id], item, done, ready,
                                                     _Once(prep.release), pending, batch))
                pending.add(work)
                work.add_done_callback(self._watch)
                # One row per loop turn: started together, a chunk's rows ran back to back for
                # milliseconds while answers waited to be read.
                await asyncio.sleep(0)
        while pending:
            await asyncio.gather(*list(pending))
        self._raise_failure()

    async def _row(self, task: str, row: dict[str, Any], read: _ReadRow, done: set[tuple[RecordKey, str]],
                   ready: asyncio.Queue, release_prep: _Once, pending: set[asyncio.Task],
                   batch: list[tuple[ModelRequest, dict[str, Any]]]) -> None:
        try:
            await self._ask_row(task, row, read, done, ready, release_prep, pending, batch)
        finally:
            release_prep()

    async def _ask_row(self, task: str, row: dict[str, Any], read: _ReadRow, done: set[tuple[RecordKey, str]],
                       ready: asyncio.Queue, release_prep: _Once, pending: set[asyncio.Task],
                       batch: list[tuple[ModelRequest, dict[str, Any]]]) -> None:
        entry, spec = self.config.entry, TASK_SPECS[task]
        sample_id, images = row["sample_id"], read.images
        boxes = _boxes(row) if spec.roi == "box" else None
        mask = images.mask if spec.roi == "mask" else None
        image_sha = read.image_sha256
        mask_sha = read.mask_sha256 if mask else None
        to_ask: list[tuple[str, str, Prompt, str]] = []
        frames: Frames | None = None
        size: tuple[int, int] | None = None
        problem: tuple[str, str] | None = None
        try:
            size = image_size_of(images.image)
            frames = plan_frames(size, entry)
        except ImageTooLarge as exc:
            problem = ("image_too_large", str(exc))
        except ImageUnreadable as exc:
            problem = ("invalid_sample", f"sample '{sample_id}': {exc}")
        if problem is None and spec.roi == "box" and not boxes:
            problem = ("invalid_sample", f"sample '{sample_id}': column 'boxes' is empty; the ROI cannot be drawn")
        if problem is None and spec.roi == "mask" and mask is None:
            problem = ("invalid_sample", f"sample '{sample_id}': column 'mask' is empty; the ROI cannot be drawn")
        for form in self.config.forms:
            for template in self.config.templates:
                key = (sample_id, task, form, template, entry.name, PROMPT_VERSION)
                prompt = None
                reason = problem
                if reason is None:
                    try:
                        prompt = build_prompt(task, form, template, row, box_format=entry.box_format, frames=frames)
                    except PromptError as exc:
                        reason = ("invalid_sample", str(exc))
                rhash = request_hash(self._fingerprint, prompt, image_sha256=image_sha, mask_sha256=mask_sha, boxes=boxes,
                                     generation=self._generation, config_key=(task, form, template))
                self.expected[key] = rhash
                if reason is not None:
                    self._emit(self._record(sample_id, task, form, template, rhash, frames, size, status="error",
                                            error_reason=reason[0], error=reason[1], attempts=0))
                elif (key, rhash) in done:
                    self.progress.skipped += 1
                else:
                    to_ask.append((form, template, prompt, rhash))
        if self.progress.on_change:
            self.progress.on_change(self.progress)
        if not to_ask:
            return
        if self._admit is not None:
            # Admitted before it is prepared: a row's image then lives only while its requests are queued
            # or in flight (each answer releases one), whatever the rows' count or the server's pace.
            for _ in to_ask:
                await self._admit.acquire()
        try:
            if size is not None and size[0] * size[1] <= INLINE_PREP_PIXELS:
                # A thumbnail is prepared in less time than a worker-thread hop and its GIL hand-offs cost.
                prepared = prepare_image(images.image, entry, boxes=boxes, mask_png=mask)
            else:
                prepared = await asyncio.to_thread(prepare_cached, self.image_cache, images.image, entry,
                                                   image_sha256=image_sha, mask_sha256=mask_sha, boxes=boxes, mask_png=mask,
                                                   frames=frames)
        except (ImageTooLarge, ImageUnreadable) as exc:
            reason = "image_too_large" if isinstance(exc, ImageTooLarge) else "invalid_sample"
            if self._admit is not None:
                for _ in to_ask:
                    self._admit.release()
            for form, template, _, rhash in to_ask:
                self._emit(self._record(sample_id, task, form, template, rhash, frames, status="error",
                                        error_reason=reason, error=f"sample '{sample_id}': {exc}", attempts=0))
            return
        finally:
            release_prep()
        for form, template, prompt, rhash in to_ask:
            request = ModelRequest(
                request_id=f"{sample_id}/{task}/{form}/{template}", prompt=prompt.text, image=prepared.data,
                image_mime=prepared.mime, image_url_json=prepared.url_json, system=prompt.system,
                # in-process engines take the data URL as a string: built once per row too
                image_url=prepared.data_url if self.backend.prefers_batches else None,
                max_tokens=self.config.max_tokens, temperature=self.config.temperature, seed=self.config.seed)
            base = dict(sample_id=sample_id, task=task, form=form, template=template, rhash=rhash,
                        frames=prepared.frames)
            if self.backend.prefers_batches:
                batch.append((request, base))
                continue
            ready.put_nowait((request, base))   # admitted above: the queue never holds more than that
        if self.backend.prefers_batches and len(batch) >= self.config.batch_size:
            await self._flush_batch(batch)

    def _prep_slots(self) -> int:
        return max(4, self.config.concurrency // 8)

    def _watch(self, task: asyncio.Task) -> None:
        """Forget a finished task; keep its exception so the producer stops instead of hanging."""
        self._pending.discard(task)
        if not task.cancelled() and task.exception() is not None and self._failure is None:
            self._failure = task.exception()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    async def _asker(self, ready: asyncio.Queue) -> None:
        while (item := await ready.get()) is not None:
            request, base = item
            try:
                try:
                    answer: ChatResult | BackendError = await self.backend.generate(request)
                except BackendError as exc:
                    answer = exc
                self._emit(self._from_answer(answer, base))
            except Exception as exc:  # a bug, not a failed request: the producer stops the run with it
                self._failure = self._failure or exc
            finally:
                self._admit.release()

    async def _flush_batch(self, batch: list[tuple[ModelRequest, dict[str, Any]]]) -> None:
        # One batch at a time (in-process engines are not re-entrant); it takes all that has
        # accumulated, while other rows keep being prepared.
        async with self._batch_lock:
            current, batch[:] = list(batch), []
            if not current:
                return
            answers = await self.backend.generate_batch([request for request, _ in current])
        for (_, base), answer in zip(current, answers):
            self._emit(self._from_answer(answer, base))


@dataclass(frozen=True)
class _ReadRow:
    """A release row's image bytes and their sha256 digests (for the request hash)."""

    images: SampleImages
    image_sha256: str
    mask_sha256: str | None


def _take(images: Iterator[SampleImages], rows: int, size: int) -> list[_ReadRow]:
    """The next `rows` rows, or fewer once their image bytes reach `size` (at least one), hashed.

    Runs in the reader thread: sha256 releases the GIL, so hashing megabytes of PNG per row (~1 ms for a
    1024x768 PNG, ~4.5 ms at 2048x2048) overlaps the event loop instead of stalling its answers.
    """
    chunk: list[_ReadRow] = []
    total = 0
    for item in images:
        mask_sha = hashlib.sha256(item.mask).hexdigest() if item.mask else None
        chunk.append(_ReadRow(item, hashlib.sha256(item.image).hexdigest(), mask_sha))
        total += len(item.image) + len(item.mask or b"")
        if len(chunk) >= rows or total >= size:
            break
    return chunk


class _Once:
    """Call `action` at most once (a semaphore slot released on every path, exactly once)."""

    def __init__(self, action: Callable[[], None]) -> None:
        self._action: Callable[[], None] | None = action

    def __call__(self) -> None:
        action, self._action = self._action, None
        if action is not None:
            action()


def completeness(predictions: Path, expected: dict[RecordKey, str]) -> list[dict[str, Any]]:
    """Expected vs present vs ok per (task, form, template), from what is on disk now."""
    latest: dict[RecordKey, RunRecord] = {}
    for record in iter_records(predictions, on_truncated=lambda _: None):
        if record.key in expected:
            latest[record.key] = record
    table: dict[tuple[str, str, str], dict[str, Any]] = {}
    for key, rhash in expected.items():
        config = (key[1], key[2], key[3])
        row = table.setdefault(config, {"task": config[0], "form": config[1], "template": config[2],
                                        "expected": 0, "present": 0, "ok": 0, "error": 0, "reasons": Counter()})
        row["expected"] += 1
        record = latest.get(key)
        if record is None:
            continue
        row["present"] += 1
        if record.status == "ok" and record.request_hash == rhash:
            row["ok"] += 1
        else:
            row["error"] += 1
            row["reasons"][record.error_reason or ("stale_request" if record.status == "ok" else "unknown")] += 1
    rows = []
    def order(config: tuple[str, str, str]) -> tuple[int, int, int]:
        return (_index(TASKS_ORDER, config[0]), _index(FORMS, config[1]), _index(TEMPLATES, config[2]))

    for config in sorted(table, key=order):
        row = table[config]
        row["reasons"] = dict(row["reasons"])
        rows.append(row)
    return rows


def _index(values: tuple[str, ...], value: str) -> int:
    return values.index(value) if value in values else len(values)

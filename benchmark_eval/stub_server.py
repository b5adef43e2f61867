"""A stand-in OpenAI-compatible chat server (aiohttp) with scripted, realistic VLM answers: no GPU, no model.

`mmbu eval serve-stub` (or ``python -m mmbu.benchmark_eval.stub_server``) serves it so that the whole path —
`mmbu eval run`, `judge`, `score`, `report` — can be tried on a laptop before a real model server exists; the test
suite uses it as its loopback server. The scores it earns mean nothing: it picks closed options by a hash of the
prompt and describes every image alike.

Serves ``POST /v1/chat/completions`` and ``GET /v1/models`` on 127.0.0.1 from a background
thread; one event loop holds hundreds of requests in flight. What it answers depends on the
*family* mapped to the request's ``model`` (see :data:`FAMILIES`; ``auto`` takes the box convention the model
registry declares for that model), on the prompt (closed options
listed as ``A. text`` lines; detection prompts ask for a bounding box) and on the image itself:
for boxes the server finds the bright object in the image it received and reports it in the
family's own convention, so a test can check the whole coordinate round trip at pixel level.
A judge request (the judge prompt's ``VERDICT`` lines) gets a verdict: equivalent when every word of the gold
answer is in the model answer.

With ``served_models`` the server serves only those names, as vLLM does (another name: HTTP 404 "The model
`X` does not exist."); without, it answers any name. The toolkit's preflight request
(:data:`~mmbu.benchmark_eval.backends.preflight.PREFLIGHT_PROMPT`) is answered and counted apart
(``preflights``), never in ``calls``.

Faults are injected with :meth:`OpenAIServer.inject` (429 with Retry-After, 500/503, slow
answers that outlast the client's timeout, empty answers, API refusals, bodies that are not
JSON), for the next N requests or for requests whose prompt contains a marker (a fault without a marker
leaves preflight requests alone).
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import io
import re
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from aiohttp import web
from PIL import Image

from mmbu.benchmark_eval.backends.preflight import PREFLIGHT_PROMPT
from mmbu.core.boxes import iou

# family -> how it writes answers. `box` is (scale, order, template); scale is one of
# pixel (of the image as received), norm1000, norm1.
FAMILIES: dict[str, dict[str, Any]] = {
    "terse": {"letter": "{letter}", "box": ("pixel", "xyxy", "[{a}, {b}, {c}, {d}]")},
    "chatty": {
        "letter": ("Looking carefully at the image, the highlighted structure has the typical appearance of option "
                   "**{letter}**.\n\nThe correct answer is **{letter}**. The other options can be ruled out because "
                   "their appearance differs in shape and texture."),
        "box": ("pixel", "xyxy", "The object is located at approximately [{a}, {b}, {c}, {d}] in pixel coordinates."),
    },
    "tagged": {
        "letter": "<think>\nThe outlined region shows a structure; comparing with the options, {letter} fits best.\n"
                  "</think>\n<answer>{letter}</answer>",
        "box": ("norm1000", "xyxy", "<think>\nLocate the target.\n</think>\n<answer>[{a}, {b}, {c}, {d}]</answer>"),
    },
    "json": {"letter": '{{"answer": "{letter}"}}', "box": ("pixel", "xyxy", '{{"bbox": [{a}, {b}, {c}, {d}]}}')},
    "qwen25": {
        "letter": "{letter}",
        "box": ("pixel", "xyxy", '```json\n[\n  {{"bbox_2d": [{a}, {b}, {c}, {d}], "label": "{target}"}}\n]\n```'),
    },
    "qwen3": {
        "letter": "{letter}. {text}",
        "box": ("norm1000", "xyxy", '```json\n[\n  {{"bbox_2d": [{a}, {b}, {c}, {d}], "label": "{target}"}}\n]\n```'),
    },
    "internvl": {"letter": "{letter}", "box": ("norm1000", "xyxy", "<ref>{target}</ref><box>[[{a}, {b}, {c}, {d}]]</box>")},
    "gemini": {"letter": "**{letter}**", "box": ("norm1000", "yxyx", '```json\n[{{"box_2d": [{a}, {b}, {c}, {d}], "label": "{target}"}}]\n```')},
    "llava": {"letter": "{letter}", "box": ("norm1", "xyxy", "[{a:.2f}, {b:.2f}, {c:.2f}, {d:.2f}]")},
    "malformed": {"letter": '{{"answer": "{letter}"', "box": ("pixel", "xyxy", '{{"bbox_2d": [{a}, {b}, {c},')},
    # refuses in plain text (an answer to be scored wrong, unlike an API-level refusal)
    "refuser": {"letter": "I'm sorry, but I can't help with identifying findings in medical images.",
                "box": ("pixel", "xyxy", "I'm sorry, but I can't help with locating findings in medical images.")},
}
OPEN_PHRASES = ("round dark nuclei", "an elongated structure", "a bright circular object", "granular texture")
_OPTION_LINE = re.compile(r"^\s*([A-Z])[.)]\s+(.+?)\s*$", re.M)


@dataclass
class ChatCall:
    """One received request, parsed the way the scripts need it."""

    model: str
    prompt: str
    system: str | None
    image_urls: list[str]
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def options(self) -> dict[str, str]:
        return dict(_OPTION_LINE.findall(self.prompt))

    @property
    def wants_box(self) -> bool:
        return bool(re.search(r"bounding box", self.prompt, re.I)) and not self.options

    def image(self, index: int = 0) -> Image.Image:
        """The received image, decoded once."""
        cache = self.__dict__.setdefault("_decoded", {})
        if index not in cache:
            _, _, data = self.image_urls[index].partition(",")
            cache[index] = Image.open(io.BytesIO(base64.b64decode(data)))
        return cache[index]


@dataclass
class Fault:
    kind: str                 # 429 | 500 | 503 | timeout | delay | empty | refusal | content_filter | bad_body
                              # | drop (connection closed, no answer) | truncated (body cut short)
                              # | a key of MALFORMED (valid JSON of the wrong shape) | huge (200 MB, chunked)
                              # | huge_declared (Content-Length 200 MB) | gzip_bomb (1 MiB of gzip, 1 GiB inflated)
                              # | echo_auth (HTTP 400 whose body echoes the request headers, as some proxies do)
    remaining: int
    match: str | None = None
    retry_after: float | None = None
    delay_s: float = 0.0


@dataclass
class Stats:
    statuses: Counter = field(default_factory=Counter)
    in_flight: int = 0
    max_in_flight: int = 0
    completed: int = 0


def bright_object_box(image: Image.Image) -> tuple[int, int, int, int] | None:
    """Pixel box (x1, y1, x2 exclusive, y2 exclusive) of the pixels much brighter than the median.

    Padding around the image (a uniform band along an edge, such as LLaVA's grey) is not the object.
    """
    rgb = np.asarray(image.convert("RGB"))
    corner = rgb[0, 0]
    padded = (rgb[0] == corner).all() or (rgb[:, 0] == corner).all()
    padding = np.all(rgb == corner, axis=-1) if padded else np.zeros(rgb.shape[:2], dtype=bool)
    gray = np.asarray(image.convert("L"), dtype=np.int16)
    mask = (gray > np.median(gray[~padding]) + 60) & ~padding
    if not mask.any():
        return None
    ys, xs = np.nonzero(mask)
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


def convert_box(box: tuple[float, float, float, float], size: tuple[int, int], scale: str, order: str) -> list[float]:
    """A pixel box of an image of `size` (w, h) in a family's convention."""
    x1, y1, x2, y2 = box
    w, h = size
    if scale == "norm1000":
        values = [round(x1 / w * 1000), round(y1 / h * 1000), round(x2 / w * 1000), round(y2 / h * 1000)]
    elif scale == "norm1":
        values = [x1 / w, y1 / h, x2 / w, y2 / h]
    else:
        values = [int(x1), int(y1), int(x2), int(y2)]
    if order == "yxyx":
        values = [values[1], values[0], values[3], values[2]]
    return values


def _parse_box_text(text: str) -> list[float] | None:
    numbers = re.findall(r"-?\d+(?:\.\d+)?", text)
    return [float(n) for n in numbers[:4]] if len(numbers) >= 4 else None


def scripted_answer(call: ChatCall, family: str) -> str:
    """What a model of `family` would say to this request (deterministic)."""
    style = FAMILIES[family]
    scale, order, template = style["box"]
    options = call.options
    digest = int(hashlib.sha256(call.prompt.encode()).hexdigest(), 16)
    quoted = re.search(r"[\"“]([^\"”]+)[\"”]", call.prompt)
    target = quoted.group(1) if quoted else "object"
    found = bright_object_box(call.image()) if call.image_urls and (call.wants_box or _are_boxes(options)) else None
    if call.wants_box:
        if found is None:
            return "I could not find the requested object in the image."
        a, b, c, d = convert_box(found, call.image().size, scale, order)
        return template.format(a=a, b=b, c=c, d=d, target=target)
    if options:
        letters = sorted(options)
        letter = letters[digest % len(letters)]
        if found is not None and _are_boxes(options):
            # Detection closed: pick the listed box that best matches what the model "sees".
            mine = convert_box(found, call.image().size, scale, order)
            letter = max(letters, key=lambda k: iou(_parse_box_text(options[k]) or [0, 0, 0, 0], mine))
        return style["letter"].format(letter=letter, text=options[letter])
    if family == "refuser":
        return style["letter"]
    return f"The image shows {OPEN_PHRASES[digest % len(OPEN_PHRASES)]}."


def _are_boxes(options: dict[str, str]) -> bool:
    return bool(options) and all(re.match(r"^\[\s*-?\d", text) for key, text in options.items()
                                 if "none" not in text.lower())


# valid JSON of the wrong shape: what a broken gateway or a hostile server may send with HTTP 200
MALFORMED: dict[str, Callable[[dict[str, Any]], None]] = {
    "content_number": lambda body: body["choices"][0]["message"].update(content=42),
    "content_object": lambda body: body["choices"][0]["message"].update(content={"text": "A"}),
    "part_text_list": lambda body: body["choices"][0]["message"].update(content=[{"type": "text", "text": ["A"]}]),
    "message_list": lambda body: body["choices"][0].update(message=["A"]),
    "usage_list": lambda body: body.update(usage=[1, 2, 3]),
    "choices_object": lambda body: body.update(choices={"0": "A"}),
}
HUGE_BYTES = 200 * 1024 * 1024


def _gzip_bomb() -> bytes:
    """1 GiB of zeros as gzip (about 1 MB), made once per process."""
    global _GZIP_BOMB
    if _GZIP_BOMB is None:
        compressor, zeros = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS), bytes(16 * 1024 * 1024)
        _GZIP_BOMB = b"".join(compressor.compress(zeros) for _ in range(64)) + compressor.flush()
    return _GZIP_BOMB


_GZIP_BOMB: bytes | None = None


def completion_body(model: str, text: str | None, *, finish_reason: str = "stop", refusal: str | None = None,
                    prompt_tokens: int = 100) -> dict[str, Any]:
    completion_tokens = len((text or "").split())
    return {
        "id": f"chatcmpl-{hashlib.md5(f'{model}{text}{time.time()}'.encode()).hexdigest()[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": refusal},
                     "logprobs": None, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


def parse_call(body: dict[str, Any]) -> ChatCall:
    prompt_parts, images, system = [], [], None
    for message in body.get("messages", []):
        content = message.get("content")
        if message.get("role") == "system":
            system = content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)
            continue
        if isinstance(content, str):
            prompt_parts.append(content)
            continue
        for part in content or []:
            if part.get("type") == "text":
                prompt_parts.append(part["text"])
            elif part.get("type") == "image_url":
                images.append(part["image_url"]["url"])
    return ChatCall(model=body.get("model", ""), prompt="\n".join(prompt_parts), system=system,
                    image_urls=images, body=body)


class OpenAIServer:
    """Start with ``with OpenAIServer(...) as server:``; point clients at ``server.url`` (ends in /v1).

    families: served model name -> family in :data:`FAMILIES` (others get `default_family`).
    responder: optional ``ChatCall -> str`` that overrides the scripted answers (e.g. a judge).
    latency_s: fixed time every answer takes. record_bodies: keep every request body.
    """

    def __init__(self, *, families: dict[str, str] | None = None, default_family: str = "terse",
                 responder: Callable[[ChatCall], str] | None = None, latency_s: float = 0.0,
                 record_bodies: bool = True, port: int = 0, host: str = "127.0.0.1",
                 served_models: list[str] | None = None, listed_models: list[str] | None = None,
                 report_as: dict[str, str] | None = None) -> None:
        self.families = dict(families or {})
        self.served_models = list(served_models) if served_models is not None else None
        self.listed_models = listed_models  # what /models lists when any name is answered (default: the families)
        self.report_as = dict(report_as or {})  # requested name -> the `model` field of the answers (an alias's target)
        self.preflights: list[ChatCall] = []
        self._host = host
        self.default_family = default_family
        self.responder = responder
        self.latency_s = latency_s
        self.record_bodies = record_bodies
        self.calls: list[ChatCall] = []
        self.stats = Stats()
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self._port = port
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self._host}:{self._port}/v1"

    def start(self) -> OpenAIServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    async def _start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port, backlog=1024, reuse_address=True)
        await site.start()
        self._port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    async def _shutdown(self) -> None:
        """Stop listening, then cancel answers still pending (slow or timed-out requests)."""
        if self._runner is not None:
            await self._runner.cleanup()
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting -------------------------------------------------------------------------
    def inject(self, kind: str, count: int = 1, *, match: str | None = None, retry_after: float | None = None,
               delay_s: float = 0.0) -> None:
        """The next `count` requests (whose prompt contains `match`, if given) get fault `kind`."""
        with self._lock:
            self._faults.append(Fault(kind, count, match, retry_after, delay_s))

    def _take_fault(self, prompt: str) -> Fault | None:
        preflight = prompt == PREFLIGHT_PROMPT
        with self._lock:
            for fault in self._faults:
                if fault.remaining > 0 and (fault.match in prompt if fault.match is not None else not preflight):
                    fault.remaining -= 1
                    return fault
        return None

    # -- handlers --------------------------------------------------------------------------
    async def _models(self, request: web.Request) -> web.Response:
        names = self.served_models if self.served_models is not None else (
            self.listed_models or sorted(self.families) or ["loopback"])
        return web.json_response({"object": "list", "data": [{"id": n, "object": "model"} for n in names]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.stats.in_flight += 1
        self.stats.max_in_flight = max(self.stats.max_in_flight, self.stats.in_flight)
        try:
            response = await self._answer(request)
        finally:
            self.stats.in_flight -= 1
        self.stats.statuses[response.status] += 1
        self.stats.completed += 1
        return response

    async def _answer(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            return web.json_response({"error": {"message": "request body is not JSON", "type": "invalid_request_error"}},
                                     status=400)
        call = parse_call(body)
        call.headers = {k.lower(): v for k, v in request.headers.items()}
        if self.served_models is not None and call.model not in self.served_models:
            return web.json_response({"object": "error", "message": f"The model `{call.model}` does not exist.",
                                      "type": "NotFoundError", "param": None, "code": 404}, status=404)
        if call.prompt == PREFLIGHT_PROMPT:
            self.preflights.append(call)
        elif self.record_bodies:
            self.calls.append(call)
        fault = self._take_fault(call.prompt)
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if fault is not None:
            if fault.delay_s:
                await asyncio.sleep(fault.delay_s)
            if fault.kind == "429":
                headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
                return web.json_response({"error": {"message": "Rate limit reached for requests", "type": "requests",
                                                    "code": "rate_limit_exceeded"}}, status=429, headers=headers)
            if fault.kind in ("500", "503"):
                return web.json_response({"error": {"message": "The server had an error while processing your request.",
                                                    "type": "server_error"}}, status=int(fault.kind))
            if fault.kind == "drop":
                request.transport.close()  # the connection ends with no status line at all
                return web.Response(status=499)
            if fault.kind == "truncated":  # promises a whole completion, sends its first bytes, hangs up
                response = web.StreamResponse(headers={"Content-Type": "application/json", "Content-Length": "400"})
                await response.prepare(request)
                await response.write(b'{"id": "chatcmpl-cut", "choices": [{"message": {"con')
                request.transport.close()
                return response
            if fault.kind == "bad_body":
                return web.Response(text="<html><body>Bad Gateway</body></html>", content_type="text/html")
            if fault.kind == "empty":
                return web.json_response(completion_body(call.model, ""))
            if fault.kind == "refusal":
                return web.json_response(completion_body(call.model, None, refusal="I'm sorry, I can't help with that."))
            if fault.kind == "content_filter":
                return web.json_response(completion_body(call.model, None, finish_reason="content_filter"))
            if fault.kind in MALFORMED:
                body = completion_body(call.model, "A")
                MALFORMED[fault.kind](body)
                return web.json_response(body)
            if fault.kind in ("huge", "huge_declared"):
                headers = {"Content-Type": "application/json"}
                if fault.kind == "huge_declared":
                    headers["Content-Length"] = str(HUGE_BYTES)
                response = web.StreamResponse(headers=headers)
                await response.prepare(request)
                chunk = b" " * (1024 * 1024)
                try:
                    for _ in range(HUGE_BYTES // len(chunk)):
                        await response.write(chunk)
                except (ConnectionResetError, RuntimeError):  # the client stopped reading: as it should
                    pass
                return response
            if fault.kind == "gzip_bomb":
                return web.Response(body=_gzip_bomb(), headers={"Content-Type": "application/json",
                                                                "Content-Encoding": "gzip"})
            if fault.kind == "echo_auth":
                echoed = {k: v for k, v in request.headers.items()}
                return web.json_response({"error": {"message": f"invalid model; request was {echoed}",
                                                    "type": "invalid_request_error"}}, status=400)
            if fault.kind == "too_long":
                return web.json_response({"error": {"message": "This model's maximum context length is 32768 tokens. "
                                                    "However, you requested 60025 tokens.", "type": "BadRequestError"}},
                                         status=400)
            # "timeout" and "delay" fall through to a normal answer after the delay.
        if call.prompt == PREFLIGHT_PROMPT:
            return web.json_response(completion_body(self.report_as.get(call.model, call.model), "OK"))
        if self.responder is not None:
            text = self.responder(call)
        elif call.system and "VERDICT: NOT_EQUIVALENT" in call.system:
            text = judge_verdict(call.prompt)
        else:
            family = self.families.get(call.model) or _family_of(call.model, self.default_family)
            text = await asyncio.get_running_loop().run_in_executor(None, scripted_answer, call, family) \
                if call.image_urls and (call.wants_box or _are_boxes(call.options)) else scripted_answer(call, family)
        return web.json_response(completion_body(self.report_as.get(call.model, call.model), text))


def judge_verdict(prompt: str) -> str:
    """A stand-in judge: equivalent when every word of the gold answer appears in the model answer."""
    gold = re.search(r"<gold_answer>(.*?)</gold_answer>", prompt, re.S)  # the judge prompt's user template
    answer = re.search(r"<model_answer>(.*?)</model_answer>", prompt, re.S)
    words = lambda text: set(re.findall(r"\w+", text.casefold()))  # noqa: E731
    same = bool(gold and answer and words(gold.group(1)) and words(gold.group(1)) <= words(answer.group(1)))
    return f"VERDICT: {'EQUIVALENT' if same else 'NOT_EQUIVALENT'}"


# registry box convention (scale, order) -> the family that answers in it
_AUTO_FAMILIES = {("pixel", "xyxy"): "terse", ("norm1000", "xyxy"): "internvl", ("norm1000", "yxyx"): "gemini",
                  ("norm1", "xyxy"): "llava"}


def _family_of(model: str, default: str) -> str:
    """`default`, or for ``auto`` the family answering in the box convention the registry declares for `model`."""
    if default != "auto":
        return default
    from mmbu.benchmark_eval.models.registry import RegistryError, default_registry

    try:
        entry = default_registry().find(model)
    except RegistryError:
        entry = None
    if entry is None:
        return "terse"
    return _AUTO_FAMILIES.get((entry.box_format.scale, entry.box_format.order), "terse")


def serve(*, host: str = "127.0.0.1", port: int = 8000, latency_s: float = 0.0, family: str = "auto",
          served_models: list[str] | None = None, announce: Callable[[str], None] = print) -> None:
    """Serve until interrupted (Ctrl-C or SIGTERM), announcing the base URL first. Without `served_models` it
    answers any name and lists the served names of every registered model."""
    from mmbu.benchmark_eval.models.registry import default_registry

    listed = sorted({entry.served_name for entry in default_registry().models})
    server = OpenAIServer(default_family=family, latency_s=latency_s, record_bodies=False, port=port, host=host,
                          served_models=served_models or None, listed_models=listed)
    server.start()
    announce(server.url)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def main() -> None:  # pragma: no cover - `python -m mmbu.benchmark_eval.stub_server`, and the benchmark
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--family", default="auto", choices=["auto", *FAMILIES])
    parser.add_argument("--model", action="append", default=None, help="serve only this name (repeatable)")
    args = parser.parse_args()
    serve(host=args.host, port=args.port, latency_s=args.latency, family=args.family, served_models=args.model,
          announce=lambda url: print(url, flush=True))


if __name__ == "__main__":  # pragma: no cover
    main()

"""Agreement of the assisted extraction (``mmbu eval judge --extract-closed``) with human labels.

Sends the corpus's replies (by default the locked part's replies that the strict parser leaves unparseable)
to an extractor behind an OpenAI-compatible server, with the toolkit's own extraction prompt, and compares
what it names with the hand labels of tests/benchmark_eval/data/closed_replies:

    .venv/bin/python benchmarks/closed_extraction_agreement.py --base-url http://HOST:8000/v1 \\
        --model Qwen/Qwen3-32B [--split locked|development|all] [--all-replies] [--cache extractions.jsonl]

Printed: for the replies asked, the clear answers the extractor recovers, its wrong letters and the letters it
gives to non-answers; then the strict parser alone and strict + assisted over the whole split. Extractions are
cached (a second run asks nothing new). Exit 1 when some replies got no extraction.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

from mmbu.benchmark_eval.backends.openai_compat import DEFAULT_API_KEY_ENV, OpenAICompatClient
from mmbu.benchmark_eval.judge.extract import ClosedItem, extract_items
from mmbu.benchmark_eval.judge.extraction_cache import EXTRACT_PROMPT_VERSION, ExtractionCache, extraction_key
from mmbu.benchmark_eval.judge.precheck import final_answer_text
from mmbu.benchmark_eval.parser import ReasoningMarkers, parse_closed_answer

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "benchmark_eval" / "data" / "closed_replies" / "replies.jsonl"


def markers(case: dict) -> ReasoningMarkers:
    declared = case["reasoning"]
    return ReasoningMarkers() if declared is None else ReasoningMarkers(tuple(map(tuple, declared["pairs"])),
                                                                       declared["prefilled"])


def tally(pairs: list[tuple[str | None, str | None]]) -> Counter:
    """(human label, letter read) pairs → clear / read / wrong / no_answer / invented."""
    counts = Counter()
    for label, read in pairs:
        if label is None:
            counts["no_answer"] += 1
            counts["invented"] += read is not None
        else:
            counts["clear"] += 1
            counts["read"] += read == label
            counts["wrong"] += read is not None and read != label
    return counts


def line(name: str, counts: Counter) -> str:
    return (f"{name}: clear answers read {counts['read']}/{counts['clear']}, wrong letters {counts['wrong']}, "
            f"letters given to non-answers {counts['invented']}/{counts['no_answer']}")


def measure(cases: list[dict], base_url: str, model: str, cache_path: Path, all_replies: bool = False,
            api_key_env: str | None = DEFAULT_API_KEY_ENV, concurrency: int = 8) -> dict:
    """Ask the extractor and compare; returns the counts (``asked``, ``strict``, ``assisted``) and errors."""
    strict = {case["id"]: parse_closed_answer(case["reply"], case["options"], markers(case)).label for case in cases}
    asked = [case for case in cases if all_replies or strict[case["id"]] is None]
    texts = {case["id"]: final_answer_text(case["reply"], markers(case)) for case in asked}
    items = [ClosedItem(texts[case["id"]], tuple(case["options"])) for case in asked]
    cache = ExtractionCache(cache_path)

    async def run():
        async with OpenAICompatClient(base_url, model, api_key_env=api_key_env, concurrency=concurrency) as client:
            async def chat(messages):
                return (await client.chat(messages, temperature=0.0, max_tokens=2048)).text
            return await extract_items(items, chat, cache, model)

    summary = asyncio.run(run())

    def extracted(case: dict) -> str | None:
        entry = cache.get(extraction_key(texts[case["id"]], tuple(case["options"]), model, EXTRACT_PROMPT_VERSION))
        return entry.option if entry is not None and entry.option != "none" else None

    by_extractor = {case["id"]: extracted(case) for case in asked}
    return {
        "asked": tally([(case["label"], by_extractor[case["id"]]) for case in asked]),
        "strict": tally([(case["label"], strict[case["id"]]) for case in cases]),
        "assisted": tally([(case["label"], strict[case["id"]] or by_extractor.get(case["id"])) for case in cases]),
        "errors": summary.errors,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True, help="OpenAI-compatible base URL, including /v1")
    parser.add_argument("--model", required=True, help="the extractor (the judge model) as the server knows it")
    parser.add_argument("--split", default="locked", choices=("locked", "development", "all"))
    parser.add_argument("--all-replies", action="store_true", help="ask about every reply, not only unparseable ones")
    parser.add_argument("--cache", type=Path, default=None, help="extractions.jsonl to keep (default: a temporary one)")
    parser.add_argument("--api-key-env", default=DEFAULT_API_KEY_ENV)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    args = parser.parse_args(argv)

    cases = [json.loads(text) for text in args.corpus.read_text(encoding="utf-8").splitlines()]
    cases = [c for c in cases if not c["disputed"] and (args.split == "all" or c["split"] == args.split)]
    with tempfile.TemporaryDirectory() as scratch:
        cache = args.cache or Path(scratch) / "extractions.jsonl"
        result = measure(cases, args.base_url, args.model, cache, args.all_replies, args.api_key_env)
    print(f"{args.model} on the {args.split} corpus ({len(cases)} replies), prompt {EXTRACT_PROMPT_VERSION}")
    print(line("replies asked (the extractor alone)", result["asked"]))
    print(line("strict parser", result["strict"]))
    print(line("strict + assisted", result["assisted"]))
    if result["errors"]:
        print(f"{result['errors']} replies got no extraction", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

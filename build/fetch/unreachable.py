"""Fetch failures as a user reads them: one line per unreachable host naming its datasets, one per other failure.

Offline, a catalogue of 150 datasets on 29 hosts is 29 lines, not 150; each dataset's own line stays in the
reports (`build-report.json`, `reports/fetch-report.jsonl`, `release/exclusions.csv`).
"""
from __future__ import annotations

import re
from collections.abc import Iterable

from mmbu.build.fetch.model import FetchResult

# what the plan says of a dataset whose host did not answer (`plan._HostBook.down`)
UNREACHABLE = re.compile(r"^host \S+ is unreachable \(")


def failure_lines(results: Iterable[FetchResult], report: str) -> list[str]:
    """`✗ host H is unreachable (cause): N dataset(s) not fetched: a, b` per host, then `✗ dataset <id>: <cause>` per
    other failed dataset; `report` names where the per-dataset details are."""
    hosts: dict[str, list[str]] = {}
    others = []
    for result in results:
        if result.ok:
            continue
        if result.error and UNREACHABLE.match(result.error):
            hosts.setdefault(result.error, []).append(result.dataset_id)
        else:
            others.append(f"✗ dataset {result.dataset_id}: {result.error}")
    grouped = [f"✗ {cause}: {len(ids)} dataset(s) not fetched: {', '.join(sorted(ids))} (details: {report})"
               for cause, ids in hosts.items()]
    return grouped + others

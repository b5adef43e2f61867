"""The files of an evaluation run directory (`runs/<model>/`, docs/architecture.md §3.5), named once.

`mmbu eval run` writes the first three, `mmbu eval judge` the judge's; `score` and `report` read them all. Users
and scripts open these files by name, so the names are part of the contract.
"""
from __future__ import annotations

from enum import StrEnum


class RunFile(StrEnum):
    PREDICTIONS = "predictions.jsonl"  # the run records, append-only
    RUN = "run.json"  # what each `mmbu eval run` on the directory was asked, and the release it read
    COMPLETENESS = "completeness.json"  # expected / present / ok per configuration after the last run
    LOCK = ".lock"  # held by the one writer of the directory
    JUDGE = "judge.json"  # whose verdicts `score` uses
    JUDGEMENTS = "judgements.jsonl"  # the verdicts, append-only
    JUDGE_AGREEMENT = "judge_agreement.json"  # two judges' agreement, when a second judge ran
    EXTRACTOR = "extractor.json"  # whose extractions the assisted score uses
    EXTRACTIONS = "extractions.jsonl"  # the extractions of unparseable closed replies, append-only

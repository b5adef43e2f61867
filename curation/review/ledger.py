"""Everything the review tool reads, loaded once: candidates (discover output), nominations, reviewer files.

Bad files and lines are reported as problems (one sentence naming the file) and skipped; the rest loads.
A reviewer who filed two different decisions on the same candidate and round is a conflict: neither
counts until one file is removed.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmbu.curation.review.catalogue import CATALOGUE_DIR, TrailFile, load_trail_files
from mmbu.curation.review.model import NOMINATIONS_FILE, Nomination, Review, ReviewFileError, load_nominations, load_review
from mmbu.curation.review.rules import ReviewRules


@dataclass
class Ledger:
    candidates: dict[str, dict[str, Any]] = field(default_factory=dict)  # ref -> discover record
    nominations: dict[str, Nomination] = field(default_factory=dict)
    reviews: list[Review] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    trail_files: dict[str, TrailFile] = field(default_factory=dict)  # ref -> its per-dataset trail file

    def refs(self) -> list[str]:
        """Every dataset ever considered, nominations first, then candidates, then refs only reviews name."""
        seen = dict.fromkeys([*self.nominations, *self.candidates, *(r.candidate for r in self.reviews)])
        return list(seen)

    def reviews_for(self, ref: str, round_: int) -> list[Review]:
        return [review for review in self.reviews if review.candidate == ref and review.round == round_]

    def title(self, ref: str) -> str:
        if ref in self.nominations:
            return self.nominations[ref].title
        return str(self.candidates.get(ref, {}).get("title", ""))


def load_candidates(folder: Path, ledger: Ledger) -> None:
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                ref = f"{record['source']}:{record['id']}"
            except (ValueError, KeyError, TypeError):
                ledger.problems.append(f"{path}: line {number}: not a candidate record (JSON with source and id)")
                continue
            ledger.candidates.setdefault(ref, record)


def load_ledger(reviews_dir: Path, candidates_dir: Path, rules: ReviewRules) -> Ledger:
    ledger = Ledger()
    load_candidates(candidates_dir, ledger)
    nominations = reviews_dir / NOMINATIONS_FILE
    if nominations.is_file():
        try:
            ledger.nominations = {n.ref: n for n in load_nominations(nominations)}
        except ReviewFileError as exc:
            ledger.problems.append(str(exc))
    trail_files, problems = load_trail_files(reviews_dir, rules)
    ledger.problems += problems
    for trail in trail_files:
        if trail.ref in ledger.nominations:
            ledger.problems.append(f"{trail.path}: {trail.ref} is also nominated in {NOMINATIONS_FILE}; keep one")
        ledger.trail_files[trail.ref] = trail
        ledger.nominations.setdefault(trail.ref, Nomination(ref=trail.ref, title=trail.title, url=trail.url or "",
                                                            nominated_by=trail.nominated_by, note=trail.note))
    by_key: dict[tuple[str, int, str], Review] = {}
    conflicts: set[tuple[str, int, str]] = set()
    files = sorted(p for p in reviews_dir.rglob("*.y*ml") if p.name != NOMINATIONS_FILE) if reviews_dir.is_dir() else []
    loaded: list[Review] = [review for trail in trail_files for review in trail.as_reviews()]
    for path in files:
        parts = path.relative_to(reviews_dir).parts
        if path.suffix not in (".yaml", ".yml") or "drafts" in parts or parts[0] == CATALOGUE_DIR:
            continue
        try:
            loaded.append(load_review(path, rules.criteria))
        except ReviewFileError as exc:
            ledger.problems.append(str(exc))
    for review in loaded:
        path = review.path
        earlier = by_key.get(review.key)
        if earlier is None:
            by_key[review.key] = review
        elif not earlier.same_decision(review):
            conflicts.add(review.key)
            ledger.problems.append(f"{path}: reviewer {review.reviewer} already decided {review.candidate} in round "
                                   f"{review.round} differently in {earlier.path}; neither counts until one is removed")
    ledger.reviews = [review for key, review in by_key.items() if key not in conflicts]
    known = set(ledger.candidates) | set(ledger.nominations)
    for review in ledger.reviews:
        record = ledger.candidates.get(review.candidate)
        if review.candidate not in known:
            ledger.problems.append(f"{review.path}: candidate {review.candidate} is in no candidates file and no "
                                   "nomination")
        elif record and record.get("excluded") and review.candidate not in ledger.nominations:
            ledger.problems.append(f"{review.path}: candidate {review.candidate} was excluded by screening "
                                   f"({', '.join(record.get('flags') or [])}); nominate it to review it anyway")
    return ledger

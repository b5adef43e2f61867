"""The discovery loop: queries → every source's dialect (Zenodo: one request per resource-type pass) → pages →
candidates (one per record, however many passes return it) → dedupe → screen → score.

Stops on the query budget; a compiled request that a source has already answered is not sent again;
paging stops when a page adds nothing new; a query whose results are thin is widened. A failing source
is reported and the run goes on (a blocked host is skipped for the rest of the run); with the raw
responses cached by the polite session, a rerun after a crash replays what was fetched and continues.
"""
from __future__ import annotations

import json
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from mmbu.curation.agent.contamination import ExclusionList
from mmbu.curation.agent.dedupe import dedupe
from mmbu.curation.agent.dialects import COMPILERS, source_requests
from mmbu.curation.agent.gaps import Gap
from mmbu.curation.agent.llm import LlmHelper
from mmbu.curation.agent.queries import Query, widen
from mmbu.curation.agent.scoring import score
from mmbu.curation.agent.screening import screen
from mmbu.curation.agent.settings import DiscoverySettings
from mmbu.curation.http import BlockedError, HttpError
from mmbu.curation.sources._paging import LiveSource
from mmbu.curation.sources.candidate import Candidate, Lead, SourceRef, SourceResponseError
from mmbu.curation.sources.paperswithcode import PwcIndex, lead_refs
from mmbu.taxonomy.model import Taxonomy

SEARCH_ERRORS = (HttpError, SourceResponseError)
MAX_FAILURES_IN_A_ROW = 2  # a source that fails this many queries in a row is left alone for the run


@dataclass
class DiscoveryReport:
    candidates: list[Candidate]
    problems: list[str] = field(default_factory=list)
    queries_run: list[str] = field(default_factory=list)
    leads: int = 0

    def summary(self) -> dict[str, Any]:
        by_source = Counter(candidate.source for candidate in self.candidates)
        # Zenodo's resource types (dataset, image-photo, ...), each with how many screening excluded
        by_type = Counter(c.resource_type for c in self.candidates if c.resource_type)
        excluded_by_type = Counter(c.resource_type for c in self.candidates if c.resource_type and c.excluded)
        return {"candidates": len(self.candidates), "excluded": sum(c.excluded for c in self.candidates),
                "by_source": dict(by_source), "queries": len(self.queries_run), "leads": self.leads,
                "problems": len(self.problems),
                "by_resource_type": {kind: {"found": n, "excluded": excluded_by_type[kind]}
                                     for kind, n in sorted(by_type.items())}}


class Discoverer:
    """`hosts` maps source name -> client (zenodo/huggingface/kaggle); `searched` is the subset to search.

    Hosts not searched are still used to resolve Papers with Code leads.
    """

    def __init__(self, taxonomy: Taxonomy, settings: DiscoverySettings, exclusions: ExclusionList,
                 hosts: dict[str, LiveSource], searched: Iterable[str], pwc: PwcIndex | None = None,
                 llm: LlmHelper | None = None, on_query: Callable[[Query], None] | None = None):
        self.taxonomy = taxonomy
        self.settings = settings
        self.exclusions = exclusions
        self.hosts = hosts
        self.searched = [name for name in searched if name in hosts]
        self.pwc = pwc
        self.llm = llm
        self.on_query = on_query or (lambda query: None)
        self.found: dict[str, Candidate] = {}
        self.problems: list[str] = []
        self.blocked: set[str] = set()
        self._failures: dict[str, int] = {}
        self._answered: dict[str, list[str]] = {}  # compiled request -> refs it returned
        self._leads: dict[str, list[str]] = {}  # lead id -> refs it resolved to

    # -- searching -----------------------------------------------------------------------------------------------

    def run(self, queries: list[Query], max_queries: int, gaps: list[Gap] = ()) -> DiscoveryReport:
        pending = deque(queries)
        seen: set[Query] = set()
        ran: list[str] = []
        while pending and len(ran) < max_queries:
            query = pending.popleft()
            if query in seen:
                continue
            seen.add(query)
            ran.append(query.text)
            self.on_query(query)
            new = sum(self._search(name, query) for name in self.searched)
            if self.pwc is not None:
                new += self._search_pwc(query)
            wider = widen(query) if new < self.settings.widen_below else None
            if wider is not None and wider not in seen:
                pending.appendleft(wider)
        candidates = self._finish(gaps)
        return DiscoveryReport(candidates, self.problems + (self.llm.problems if self.llm else []), ran,
                               leads=len(self._leads))

    def _add(self, candidate: Candidate, query: Query) -> bool:
        """Record a hit; True when it is new to this run."""
        kept = self.found.setdefault(candidate.ref, candidate)
        if query.text not in kept.queries:
            kept.queries.append(query.text)
        return kept is candidate

    def _search(self, name: str, query: Query) -> int:
        return sum(self._search_channel(name, request.channel, request.compiled, query, request.max_pages)
                   for request in source_requests(name, query, self.settings))

    def _search_channel(self, name: str, channel: str, compiled: dict[str, Any], query: Query, max_pages: int) -> int:
        """One compiled request of a source (Zenodo sends one per resource-type pass); new hits are counted.

        A blocked host stops all its channels; failures in a row are counted per channel, so a pass that keeps
        failing is left alone while the host's other passes go on.
        """
        if name in self.blocked or channel in self.blocked:
            return 0
        key = f"{name}:{json.dumps(compiled, sort_keys=True)}"
        if key in self._answered:
            for ref in self._answered[key]:
                self._add(self.found[ref], query)
            return 0
        refs: list[str] = []
        new = 0
        try:
            for page in self.hosts[name].search(compiled, max_pages):
                self.problems.extend(page.problems)
                added = 0
                for candidate in page.candidates:
                    added += self._add(candidate, query)
                    refs.append(candidate.ref)
                new += added
                if added == 0:
                    break  # this page added nothing new: further pages will not either
        except BlockedError as exc:
            self.blocked.add(name)
            self.problems.append(f"{channel}: query {query.text}: {exc}; {name} is skipped for the rest of the run")
            return new
        except SEARCH_ERRORS as exc:
            self.problems.append(f"{channel}: query {query.text}: {exc}")
            self._failures[channel] = self._failures.get(channel, 0) + 1
            if self._failures[channel] >= MAX_FAILURES_IN_A_ROW:
                self.blocked.add(channel)
                self.problems.append(f"{channel} failed {MAX_FAILURES_IN_A_ROW} queries in a row; it is skipped for "
                                     "the rest of the run (rerun later: answers so far are cached)")
            return new  # not remembered as answered: a rerun tries it again
        self._failures[channel] = 0
        self._answered[key] = refs
        return new

    def _search_pwc(self, query: Query) -> int:
        assert self.pwc is not None
        new = 0
        for lead in self.pwc.search(COMPILERS["paperswithcode"](query)):
            if lead.id not in self._leads:
                self._leads[lead.id] = self._resolve(lead, query)
                new += len(self._leads[lead.id])
            for ref in self._leads[lead.id]:
                self._add(self.found[ref], query)
        return new

    def _resolve(self, lead: Lead, query: Query) -> list[str]:
        """Fetch each real host a lead points to; a lead that points nowhere is kept, excluded, as a record."""
        lead_ref = SourceRef(source="paperswithcode", id=lead.id, url=lead.url)
        resolved: list[str] = []
        for ref in lead_refs(lead):
            host = self.hosts.get(ref.source)
            if host is None or ref.source in self.blocked:
                continue
            try:
                candidate = host.dataset(ref.id)
            except BlockedError as exc:
                self.blocked.add(ref.source)
                self.problems.append(f"paperswithcode: lead {lead.id} -> {ref.ref}: {exc}")
                continue
            except SEARCH_ERRORS as exc:
                self.problems.append(f"paperswithcode: lead {lead.id} -> {ref.ref}: {exc}")
                continue
            self._add(candidate, query)
            kept = self.found[candidate.ref]
            if lead_ref.ref not in {r.ref for r in kept.also_found_in}:
                kept.also_found_in.append(lead_ref)
            resolved.append(kept.ref)
        if resolved:
            return resolved
        record = Candidate(source="paperswithcode", id=lead.id, title=lead.full_name or lead.name,
                           url=lead.url or lead.homepage or "", homepage=lead.homepage, description=lead.description,
                           keywords=[*lead.modalities, *lead.tasks], related=lead.links)
        record.flag("unresolved-lead", "a Papers with Code record whose links point to no Zenodo record, Hub "
                    f"dataset or Kaggle dataset (homepage: {lead.homepage or 'none'}); resolve it by hand")
        self._add(record, query)
        return [record.ref]

    # -- after searching -----------------------------------------------------------------------------------------

    def _finish(self, gaps: Iterable[Gap]) -> list[Candidate]:
        gap_by_key = {gap.key: gap for gap in gaps}
        merged = dedupe(self.found.values())
        for candidate in merged:
            screen(candidate, self.settings, self.exclusions)
            score(candidate, self.taxonomy, self.settings.score_weights, set(gap_by_key))
            if self.llm is not None and not candidate.excluded:
                self._judge(candidate, gap_by_key)
        return sorted(merged, key=lambda c: (c.excluded, -c.score, c.ref))

    def _judge(self, candidate: Candidate, gap_by_key: dict[str, Gap]) -> None:
        assert self.llm is not None
        leaves = [t for f in ("sub_modality", "modality") for t in candidate.matched_terms.get(f, []) if t in gap_by_key]
        gap = gap_by_key[leaves[0]] if leaves else None
        if gap is None:
            return
        relevance = self.llm.relevance(candidate, gap.leaf.name, gap.modality.name)
        if relevance is not None:
            candidate.llm_relevance = relevance
            candidate.score = round(candidate.score + relevance * max(self.settings.score_weights.values()), 3)

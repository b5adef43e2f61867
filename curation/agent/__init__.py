"""The discovery agent: taxonomy gaps → deterministic queries → each source's dialect → candidates,
deduplicated, screened (licence, label provenance, image evidence, contamination list) and scored.

Public names: `Discoverer`, `DiscoveryReport`, `find_gaps`, `count_accepted`, `build_queries`, `widen`,
`screen`, `score`, `dedupe`, `normalise_license`, `ExclusionList`.
"""
from mmbu.curation.agent.contamination import ExclusionList
from mmbu.curation.agent.dedupe import dedupe
from mmbu.curation.agent.gaps import count_accepted, find_gaps
from mmbu.curation.agent.licenses import normalise_license
from mmbu.curation.agent.queries import build_queries, widen
from mmbu.curation.agent.run import Discoverer, DiscoveryReport
from mmbu.curation.agent.scoring import score
from mmbu.curation.agent.screening import screen

__all__ = ["Discoverer", "DiscoveryReport", "ExclusionList", "build_queries", "count_accepted", "dedupe",
           "find_gaps", "normalise_license", "score", "screen", "widen"]

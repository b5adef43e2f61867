"""Screen a candidate: licence to SPDX, label provenance, image evidence, contamination.

Each check adds a flag with a one-sentence reason; the flags named in `exclude_flags` (discovery.yaml)
mark the candidate excluded, but it stays in the output so the audit trail is complete.
"""
from __future__ import annotations

from mmbu.curation.agent.contamination import ExclusionList, name_pattern
from mmbu.curation.agent.licenses import normalise_license
from mmbu.curation.agent.settings import DiscoverySettings
from mmbu.curation.sources.candidate import Candidate


def screen_license(candidate: Candidate) -> None:
    verdict = normalise_license(candidate.license_raw, candidate.source)
    candidate.license = verdict.spdx
    if verdict.spdx is None:
        candidate.flag("unclear-license", verdict.reason or "no clear licence")
    if verdict.conflict:
        candidate.flag("license-conflict", verdict.reason or "the record's licence fields disagree")
    for ref, raw in candidate.duplicate_licenses.items():
        elsewhere = normalise_license(raw, ref.split(":", 1)[0]).spdx
        if elsewhere and verdict.spdx and elsewhere != verdict.spdx:
            candidate.flag("license-conflict", f"{candidate.ref} says {verdict.spdx} but its copy {ref} says {elsewhere}")


def screen_labels(candidate: Candidate, settings: DiscoverySettings) -> None:
    creators = [value.casefold() for value in candidate.annotations_creators]
    if "machine-generated" in creators:
        candidate.flag("machine-labels", "its card says annotations_creators: machine-generated")
        return
    text = " | ".join([*candidate.keywords, candidate.title]).casefold()
    marker = next((m for m in settings.machine_label_markers if name_pattern(m).search(text)), None)
    if marker:
        candidate.flag("machine-labels", f"its title or tags say {marker!r}")


def screen_imaging(candidate: Candidate, settings: DiscoverySettings) -> None:
    evidence = settings.imaging_evidence
    tags = {keyword.casefold() for keyword in candidate.keywords}
    text = " ".join([candidate.title, candidate.description, *candidate.keywords]).casefold()
    # Tags and files are strong evidence; words in free text are weak, and lose to a tabular/text tag.
    strong = (any(tag.casefold() in tags for tag in evidence.tags)
              or any(name.casefold().endswith(tuple(evidence.file_extensions)) for name in candidate.file_names))
    weak = any(name_pattern(word).search(text) for word in evidence.words)
    negative = [tag for tag in evidence.negative_tags if tag.casefold() in tags]
    if strong:
        return
    if negative:
        candidate.flag("not-imaging", f"no image tags or files, and it is tagged {negative[0]!r}")
    elif not weak:
        candidate.flag("no-image-evidence", "nothing in its title, tags, description or files mentions images")


def screen_contamination(candidate: Candidate, exclusions: ExclusionList) -> None:
    for match in exclusions.match(candidate):
        candidate.flag("contaminated", match.sentence)


def screen(candidate: Candidate, settings: DiscoverySettings, exclusions: ExclusionList) -> Candidate:
    """Run every check (in place) and set `excluded` from the flags; returns the candidate."""
    screen_license(candidate)
    screen_labels(candidate, settings)
    screen_imaging(candidate, settings)
    screen_contamination(candidate, exclusions)
    candidate.excluded = candidate.excluded or any(flag in settings.exclude_flags for flag in candidate.flags)
    return candidate

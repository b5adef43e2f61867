"""Screen a candidate: licence to SPDX, label provenance, image evidence, image records, contamination.

Each check adds a flag with a one-sentence reason; the flags named in `exclude_flags` (discovery.yaml)
mark the candidate excluded, but it stays in the output so the audit trail is complete.
"""
from __future__ import annotations

import re

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


def is_image_record(candidate: Candidate, settings: DiscoverySettings) -> bool:
    """A Zenodo record whose resource type is one of `zenodo.image_records.resource_types` or their sub-types."""
    kind = candidate.resource_type or ""
    return candidate.source == "zenodo" and any(kind == t or kind.startswith(f"{t}-")
                                                for t in settings.zenodo.image_records.resource_types)


def screen_imaging(candidate: Candidate, settings: DiscoverySettings) -> None:
    evidence = settings.imaging_evidence
    tags = {keyword.casefold() for keyword in candidate.keywords}
    text = " ".join([candidate.title, candidate.description, *candidate.keywords]).casefold()
    # Tags, files and an image resource type are strong evidence; words in free text are weak, and lose to a
    # tabular/text tag.
    strong = (any(tag.casefold() in tags for tag in evidence.tags)
              or any(name.casefold().endswith(tuple(evidence.file_extensions)) for name in candidate.file_names)
              or is_image_record(candidate, settings))
    weak = any(name_pattern(word).search(text) for word in evidence.words)
    negative = [tag for tag in evidence.negative_tags if tag.casefold() in tags]
    if strong:
        return
    if negative:
        candidate.flag("not-imaging", f"no image tags or files, and it is tagged {negative[0]!r}")
    elif not weak:
        candidate.flag("no-image-evidence", "nothing in its title, tags, description or files mentions images")


def stated_image_count(candidate: Candidate, nouns: list[str]) -> int:
    """The largest "1,200 images" / "350 confocal frames" count in the title, tags or description (0 if none)."""
    text = " ".join([candidate.title, *candidate.keywords, candidate.description]).casefold()
    noun = "|".join(map(re.escape, nouns))
    counts = re.findall(rf"(?<![\w.,])(\d{{1,3}}(?:,\d{{3}})+|\d+)\s+(?:[a-z-]+\s+){{0,2}}?(?:{noun})\b", text)
    return max((int(count.replace(",", "")) for count in counts), default=0)


def screen_image_record(candidate: Candidate, settings: DiscoverySettings) -> None:
    """A record uploaded as an image (Zenodo `image`, `image-photo`, ...) is usually one figure or a few photos.

    It goes on to review like a dataset only with enough image files or a bundle (archive, array container) of a
    useful size; with fewer image files but a description that speaks of enough images, it goes on flagged for a
    reviewer to check; otherwise it is excluded with the counts that decided it.
    """
    if not is_image_record(candidate, settings):
        return
    rule, kind = settings.zenodo.image_records, candidate.resource_type
    images = [name for name in candidate.file_names if name.casefold().endswith(tuple(rule.image_extensions))]
    bundles = [name for name in candidate.file_names if name.casefold().endswith(tuple(rule.bundle_extensions))]
    # a bundle whose size the host does not state gets the benefit of the doubt
    if len(images) >= rule.min_image_files or any(
            candidate.file_sizes.get(name, rule.min_bundle_bytes) >= rule.min_bundle_bytes for name in bundles):
        return
    listed = f"{len(images)} image file{'s' * (len(images) != 1)}"
    if images:
        listed += f" ({', '.join(images[:3])}{', ...' if len(images) > 3 else ''})"
    small = f", and its archive {bundles[0]} is only {candidate.file_sizes[bundles[0]] / 1024:.0f} KiB" if bundles else ""
    stated = stated_image_count(candidate, rule.count_nouns)
    if images and stated >= rule.min_image_files:
        candidate.flag("image-count-unverified", f"a Zenodo {kind} record whose text speaks of {stated} images but "
                       f"whose files hold {listed}{small}; check for multi-image files or images hosted elsewhere")
        return
    candidate.flag("too-few-images", f"a Zenodo {kind} record listing {len(candidate.file_names)} file(s), {listed}"
                   f"{small}: too few images to be a dataset (that takes {rule.min_image_files} image files or an "
                   f"archive of at least {rule.min_bundle_bytes / 2**20:g} MiB)")


def screen_contamination(candidate: Candidate, exclusions: ExclusionList) -> None:
    for match in exclusions.match(candidate):
        candidate.flag("contaminated", match.sentence)


def screen(candidate: Candidate, settings: DiscoverySettings, exclusions: ExclusionList) -> Candidate:
    """Run every check (in place) and set `excluded` from the flags; returns the candidate."""
    screen_license(candidate)
    screen_labels(candidate, settings)
    screen_imaging(candidate, settings)
    screen_image_record(candidate, settings)
    screen_contamination(candidate, exclusions)
    candidate.excluded = candidate.excluded or any(flag in settings.exclude_flags for flag in candidate.flags)
    return candidate

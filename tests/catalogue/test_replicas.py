"""Each replica spec builds a small copy of a real dataset's tree and runs that manifest's own layout over it.

A spec is data (tests/catalogue/replicas/<manifest id>.yaml, format in tests/support/catalogue_replica.py):
adding a replica for a new manifest is one YAML file, no code.
"""
from __future__ import annotations

from collections import Counter

import pytest
from support.catalogue_replica import DATASETS, build_replica, catalogue_manifests, is_demo, layout_shape, load_specs

from mmbu.build.layouts import read_samples
from mmbu.curation.manifest import load_manifest

SPECS = load_specs()
CASES = SPECS or [None]  # no spec yet: the one case checks that no catalogue manifest lacks one (never a skip)


def catalogue() -> list:
    return [m for m in catalogue_manifests() if not is_demo(m)]


@pytest.mark.parametrize("spec", CASES, ids=[spec["manifest"] if spec else "no-specs" for spec in CASES])
def test_the_manifests_layout_reads_its_replica(spec, tmp_path):
    if spec is None:
        assert not catalogue(), "catalogue manifests exist but tests/catalogue/replicas/ holds no spec"
        return
    manifest = load_manifest(DATASETS / f"{spec['manifest']}.yaml")
    cited = [c.source for c in manifest.evidence.layout] if manifest.evidence else []
    assert spec["cites"] in cited, f"{spec['_path'].name}: cites {spec['cites']!r}, not a layout source of the manifest"

    raw = build_replica(spec, tmp_path / "raw" / manifest.id)
    samples, exclusions = read_samples(manifest, raw)

    expect = spec["expect"]
    reasons = [f"{e.item}: {e.reason}" for e in exclusions]
    assert len(exclusions) == expect.get("exclusions", 0), reasons
    assert len(samples) == expect["samples"], reasons
    found = Counter(s.label for s in samples if s.label is not None)
    found.update(region.label for s in samples for region in s.regions)
    assert dict(found) == {str(k): v for k, v in expect["labels"].items()}
    assert set(found) <= set(manifest.labels), "a raw label the layout finds has no display name"
    for label, box in (expect.get("boxes") or {}).items():
        boxes = [list(r.box) for s in samples for r in s.regions if r.label == str(label) and r.box is not None]
        assert list(map(float, box)) in boxes, f"no {label} region with box {box} (found {boxes})"
    for sample in samples:
        assert sample.image_path.is_file()  # items of arrays and parquet tables are written to a layout cache


def test_every_layout_kind_in_the_catalogue_has_a_replica():
    replicated = {load_manifest(DATASETS / f"{spec['manifest']}.yaml").layout.kind for spec in SPECS}
    used = {manifest.layout.kind: manifest.id for manifest in catalogue()}
    missing = {kind: example for kind, example in used.items() if kind not in replicated}
    assert not missing, f"layout kinds without a replica spec (e.g. for): {missing}"


def test_replica_specs_name_existing_manifests_once():
    names = Counter(spec["manifest"] for spec in SPECS)
    assert all((DATASETS / f"{name}.yaml").is_file() for name in names), sorted(names)
    assert all(spec["_path"].stem == spec["manifest"] for spec in SPECS), "name each spec <manifest id>.yaml"


MIN_LAYOUT_SHAPES = 20  # issue 11: one replica per distinct layout shape, at least 20 across the catalogue


def test_replicas_cover_at_least_twenty_layout_shapes():
    """A shape is a layout kind with the options it sets (see support.catalogue_replica.layout_shape)."""
    shapes = {layout_shape(load_manifest(DATASETS / f"{spec['manifest']}.yaml").layout) for spec in SPECS}
    assert len(shapes) >= MIN_LAYOUT_SHAPES, sorted(shapes)

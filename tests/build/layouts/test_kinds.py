"""Every layout kind a manifest may name has a reader, a README section with an example, and says which
tasks it feeds and which raw labels it declares."""
from __future__ import annotations

import typing
from pathlib import Path

import pytest
import yaml

from mmbu.build.layouts import READERS
from mmbu.curation.manifest.layout import Layout
from mmbu.curation.manifest.layout_base import LayoutBase

KINDS = {typing.get_args(member.model_fields["kind"].annotation)[0]: member
         for member in typing.get_args(typing.get_args(Layout)[0])}
README = (Path(__file__).parents[3] / "manifests" / "README.md").read_text(encoding="utf-8")


def test_every_kind_has_a_reader():
    assert set(KINDS) == set(READERS)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_is_documented_with_a_yaml_example_that_validates(kind):
    assert f"`{kind}`" in README.split("## Layouts", 1)[1].split("## Picking taxonomy terms", 1)[0]
    examples = [yaml.safe_load(block.split("```", 1)[0]) for block in README.split("```yaml\n")[1:]]
    layouts = [e["layout"] for e in examples if isinstance(e, dict) and isinstance(e.get("layout"), dict)
               and e["layout"].get("kind") == kind]
    inline = f"{{kind: {kind},"
    assert layouts or inline in README, f"no example of {kind}"
    for layout in layouts:
        KINDS[kind].model_validate(layout)  # the README's example is a valid layout


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_says_what_it_feeds(kind):
    assert KINDS[kind].feeds is not LayoutBase.feeds  # the base raises NotImplementedError

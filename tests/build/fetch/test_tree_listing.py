"""Listing a fetched tree: the order, the links refused or followed, and the sizes, as pathlib's rglob gave them."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from mmbu.build.fetch.model import FetchError
from mmbu.build.fetch.sources.context import tree_file_sizes, tree_files


def _tree(root: Path) -> None:
    for name, size in [("a/b/c.png", 3), ("a-c.png", 5), ("a/b.png", 7), (".hidden/x.txt", 11), ("Z/y.png", 13),
                       ("a/b-c/d.png", 17), ("empty/.keep", 0)]:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)


def _rglob_listing(root: Path) -> list[tuple[str, int]]:
    return [(p.relative_to(root).as_posix(), p.stat().st_size) for p in sorted(root.rglob("*")) if p.is_file()]


def test_the_listing_is_rglobs_in_order_with_sizes(tmp_path: Path):
    _tree(tmp_path)
    listing = tree_file_sizes(tmp_path)
    assert listing == _rglob_listing(tmp_path)
    assert [name for name, _ in listing].index("a/b/c.png") < [name for name, _ in listing].index("a-c.png")
    assert tree_files(tmp_path, ["*.png"]) == [n for n, _ in listing if n.endswith(".png")]


def test_links_are_refused_or_followed_as_before(tmp_path: Path):
    _tree(tmp_path / "tree")
    (tmp_path / "blob").write_bytes(b"blob")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.png").write_bytes(b"s")
    os.symlink(tmp_path / "blob", tmp_path / "tree" / "a" / "linked.bin")
    with pytest.raises(FetchError, match="linked.bin is a symbolic link"):
        tree_files(tmp_path / "tree")
    os.symlink(tmp_path / "outside", tmp_path / "tree" / "linked-folder")
    followed = tree_file_sizes(tmp_path / "tree", follow_links=True)
    assert ("a/linked.bin", 4) in followed  # a linked file is read through (Hugging Face snapshots)
    assert not any(name.startswith("linked-folder") for name, _ in followed)  # a linked folder is not entered
    assert followed == _rglob_listing(tmp_path / "tree")


def test_a_missing_root_is_one_sentence(tmp_path: Path):
    with pytest.raises(FetchError, match="is not a directory"):
        tree_files(tmp_path / "nowhere")

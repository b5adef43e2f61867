"""The lock is rewritten after every fetched dataset, dumping only what changed: its text must stay exactly
what a dump of the whole document writes (reviewers diff it in pull requests)."""
from __future__ import annotations

import random

import yaml

from mmbu.build.fetch.lockfile import HEADER, LockFile, PinnedFile
from mmbu.core.yaml_io import dump_yaml


def _reference(lock: LockFile) -> str:
    """The whole document through PyYAML's own pure-Python emitter: the text the lock's writer must match."""
    document = lock.document.model_dump(mode="json")
    for entry in document["datasets"].values():
        if not entry["resolved"]:
            del entry["resolved"]
    return HEADER + yaml.safe_dump(document, sort_keys=True, allow_unicode=True)


def _entries(count: int) -> list[tuple[str, dict, dict, dict]]:
    entries = []
    for number in range(count):
        source = {"kind": "zenodo", "record": 1000 + number} if number % 3 else {
            "kind": "local", "path": "benchmarks/.work/a/very/long/folder/name/that/passes/eighty/columns/"
                                     f"when/indented/ünïcödé/{number}/images.zip"}
        files = {f"part {i} of {number}.zip": PinnedFile(sha256=f"{number * 7 + i:064x}", size=number * 1000 + i)
                 for i in range(number % 3 + 1)}
        resolved = {"revision": f"{number:040x}"} if number % 4 == 0 else {}
        entries.append((f"ds_{number:03d}", source, files, resolved))
    return entries


def test_the_lock_written_entry_by_entry_is_the_dump_of_the_whole_document(tmp_path):
    lock = LockFile(tmp_path / "manifests.lock")
    entries = _entries(40)
    random.Random(3).shuffle(entries)  # fetched in any order; written sorted
    for dataset_id, source, files, resolved in entries:
        lock.record(dataset_id, source, files, resolved)
        assert lock.path.read_text(encoding="utf-8") == _reference(lock)
    # a changed source replaces that dataset's block only, and the text is still the whole dump
    lock.record("ds_007", {"kind": "zenodo", "record": 99}, {"new.zip": PinnedFile(sha256="f" * 64, size=1)})
    assert lock.path.read_text(encoding="utf-8") == _reference(lock)
    assert "new.zip" in lock.path.read_text(encoding="utf-8")
    # a second process reads it back to the same document and writes the same text
    again = LockFile(lock.path)
    again.record("ds_000", *entries[[e[0] for e in entries].index("ds_000")][1:])
    assert again.path.read_text(encoding="utf-8") == lock.path.read_text(encoding="utf-8")


def test_dump_yaml_writes_what_pyyaml_own_emitter_writes():
    data = {"b": [1, 2.5, None, True], "a": {"text": "é" * 100, "long": "word " * 40, "empty": {}, "list": []}}
    for sort_keys in (True, False):
        assert dump_yaml(data, sort_keys=sort_keys) == yaml.safe_dump(data, sort_keys=sort_keys, allow_unicode=True)

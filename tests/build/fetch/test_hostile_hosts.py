"""Hosts and manifests that name files outside `raw/<id>/` (issue 32, point 1): a Zenodo key, a Kaggle or URL file
name, an archive member, a link in a fetched tree. Each fails its dataset in one sentence, writes nothing outside,
and the other datasets still fetch."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from support.bounded_run import run_mmbu
from support.fetch_hosts import make_tar, make_zip, serve_zenodo_record

from mmbu.build.fetch import fetch_dataset
from mmbu.build.fetch.archives import extract_archive
from mmbu.build.fetch.model import FetchError
from mmbu.build.fetch.sources import FetchContext
from mmbu.core.confinement import OutsideFolder, confined_name, name_problem
from mmbu.curation.manifest import ManifestError, load_manifest


@pytest.mark.parametrize("key", ["../../../escaped.txt", "ABSOLUTE", "..\\..\\..\\escaped.txt", "sub/../../x.txt"])
def test_a_zenodo_key_outside_the_folder_fails_its_dataset_and_writes_nothing(loopback, tmp_path, manifests_dir,
                                                                             write_manifest, key):
    outside = tmp_path / "escaped.txt"
    key = str(tmp_path / "absolute.txt") if key == "ABSOLUTE" else key
    serve_zenodo_record(loopback, 5, {key: b"hostile bytes"})
    serve_zenodo_record(loopback, 6, {"labels.csv": b"a,b\n"})
    for name, record in (("hostile", 5), ("fine", 6)):
        write_manifest(name, {"kind": "zenodo", "record": record})
    data = tmp_path / "work" / "data"

    result = run_mmbu("fetch", "--manifests", manifests_dir, "--data", data,
                      env={**os.environ, "MMBU_ZENODO_URL": loopback.url})

    assert result.returncode == 1 and "Traceback" not in result.output, result.output
    failures = [line for line in result.output.splitlines() if line.startswith("✗ dataset hostile")]
    assert len(failures) == 1 and f"the file name {key!r}" in failures[0], result.output
    assert ("is an absolute path" if key.startswith("/") else "climbs out with '..'") in failures[0]
    assert (data / "raw" / "fine" / "labels.csv").read_bytes() == b"a,b\n"
    assert not outside.exists() and not (tmp_path / "absolute.txt").exists() and not (tmp_path / "x.txt").exists()
    assert not any(path.name in ("escaped.txt", "absolute.txt", "x.txt") for path in tmp_path.rglob("*"))
    assert not loopback.requests_to(f"/api/records/5/files/{key}/content")  # refused before any download


def test_kaggle_and_url_file_names_outside_are_refused_by_validate_and_by_the_fetch(
        loopback, monkeypatch, tmp_path, manifests_dir, write_manifest, data_dir, session):
    manifest = write_manifest("kag", {"kind": "kaggle", "dataset": "o/d", "version": 1, "files": ["ok.csv"]})
    path = manifests_dir / "kag.yaml"
    path.write_text(path.read_text().replace("ok.csv", "../../../x"))
    with pytest.raises(ManifestError) as error:
        load_manifest(path)
    assert error.value.problems == [("source.files.0", "Value error, '../../../x' climbs out with '..'; every "
                                                              "path stays inside the dataset's folder raw/<id>/")]
    result = run_mmbu("manifests", "validate", path)
    assert result.returncode == 1 and "Traceback" not in result.output
    assert "source.files.0: Value error, '../../../x' climbs out with '..'" in result.stderr
    write_manifest("u", {"kind": "url", "files": [{"url": "https://example.org/a", "name": "x"}]})
    url = yaml.safe_load((manifests_dir / "u.yaml").read_text())
    url["source"]["files"][0]["name"] = "/etc/cron.d/x"
    (manifests_dir / "u.yaml").write_text(yaml.safe_dump(url))
    with pytest.raises(ManifestError, match="is absolute"):
        load_manifest(manifests_dir / "u.yaml")

    # the fetch checks again: a manifest object that skipped validation (built in Python) still writes nothing
    monkeypatch.setenv("MMBU_KAGGLE_URL", loopback.url)
    monkeypatch.setenv("KAGGLE_USERNAME", "someuser")
    monkeypatch.setenv("KAGGLE_KEY", "0123456789abcdef")
    hostile = manifest.model_copy(update={"source": manifest.source.model_copy(update={"files": ["../../../x"]})})
    result = fetch_dataset(hostile, data_dir, session=session)
    assert result.status == "error" and "the file name '../../../x' climbs out with '..'" in result.error
    assert not loopback.requests and not (tmp_path / "x").exists()


@pytest.mark.parametrize("member", ["..\\..\\evil.txt", "C:\\Windows\\evil.txt"])
def test_archive_members_named_with_backslashes_or_drives_are_refused(tmp_path, member):
    archive = tmp_path / "t" / "bad.zip"
    archive.parent.mkdir()
    archive.write_bytes(make_zip({member: b"x", "fine.txt": b"y"}))
    with pytest.raises(FetchError, match="refusing to extract"):
        extract_archive(archive, archive.parent)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["bad.zip", "t"]


def test_an_archive_member_under_a_linked_folder_is_refused(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", target / "linked")  # a folder of the target that leads out
    archive = tmp_path / "bad.tar.gz"
    archive.write_bytes(make_tar({"linked/evil.txt": b"x"}))
    with pytest.raises(FetchError, match="resolves outside"):
        extract_archive(archive, target)
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_a_fetched_tree_linking_out_is_refused_when_copied_in(tmp_path, session):
    tree = tmp_path / "snapshot"
    tree.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("the machine's file")
    os.symlink(secret, tree / "innocent.csv")
    staging = tmp_path / "staging"
    staging.mkdir()
    context = FetchContext(dataset_id="d", licence="CC0-1.0", session=session, staging=staging,
                           downloads=tmp_path / "downloads", data_dir=tmp_path, repo_root=tmp_path)
    with pytest.raises(FetchError, match="resolves outside"):
        context.copy_in(tree, "innocent.csv", origin="hf", links_within=tmp_path / "downloads")
    assert list(staging.iterdir()) == []


def test_names_are_checked_as_text_and_after_links(tmp_path):
    assert [name_problem(n) for n in ("a/b.png", "~lock.txt", "", "./", "C:x", "/a", "a/../../b", "a\x00")] == [
        None, None, "names no file", "names no file", "is an absolute path", "is an absolute path",
        "climbs out with '..'", "holds a NUL character"]
    (tmp_path / "out").mkdir()
    os.symlink(tmp_path / "out", tmp_path / "in")
    folder = tmp_path / "folder"
    folder.mkdir()
    os.symlink(tmp_path / "out", folder / "link")
    assert confined_name(folder, "a/b.txt") == folder / "a" / "b.txt"
    with pytest.raises(OutsideFolder, match="resolves outside"):
        confined_name(folder, "link/x.txt")
    assert Path(folder / "a").exists() is False

"""$MMBU_MIRROR/<id>/ is used before any network and verified like a download."""
from __future__ import annotations

from support.fetch_hosts import make_zip, sha256

from mmbu.build.fetch import LockFile, fetch_dataset

ARCHIVE = make_zip({"slides/s1.mrxs": b"[GENERAL]", "slides/s1/Slidedat.ini": b"[HIERARCHICAL]"})


def mirror_with(tmp_path, dataset_id: str, files: dict[str, bytes]):
    root = tmp_path / "mirror"
    for name, data in files.items():
        (root / dataset_id / name).parent.mkdir(parents=True, exist_ok=True)
        (root / dataset_id / name).write_bytes(data)
    return root


def test_mirror_hit_sends_no_request_and_pins(loopback, monkeypatch, tmp_path, write_manifest, data_dir, lock,
                                              session):
    monkeypatch.setenv("MMBU_ZENODO_URL", loopback.url)  # a request would be recorded here
    mirror = mirror_with(tmp_path, "slides", {"wsi.zip": ARCHIVE, "labels.csv": b"slide,label\n"})
    manifest = write_manifest("slides", {"kind": "zenodo", "record": 99})
    result = fetch_dataset(manifest, data_dir, mirror=mirror, lock=lock, session=session)
    assert result.status == "fetched" and result.fetched_from == "mirror"
    assert loopback.requests == []
    raw = data_dir / "raw" / "slides"
    assert (raw / "slides" / "s1.mrxs").read_bytes() == b"[GENERAL]"
    assert (raw / "slides" / "s1" / "Slidedat.ini").read_bytes() == b"[HIERARCHICAL]"
    assert lock.pins_for("slides", {"kind": "zenodo", "record": 99})["wsi.zip"].sha256 == sha256(ARCHIVE)
    assert (mirror / "slides" / "wsi.zip").exists()  # the mirror itself is left alone


def test_mirror_file_that_differs_from_its_pin_is_rejected(tmp_path, write_manifest, data_dir, lock):
    manifest = write_manifest("pinned", {"kind": "zenodo", "record": 5})
    good = mirror_with(tmp_path / "a", "pinned", {"data.bin": b"good bytes"})
    assert fetch_dataset(manifest, data_dir, mirror=good, lock=lock).status == "fetched"
    (data_dir / "raw" / "pinned").rename(tmp_path / "moved-away")
    bad = mirror_with(tmp_path / "b", "pinned", {"data.bin": b"tampered"})
    result = fetch_dataset(manifest, data_dir, mirror=bad, lock=LockFile(lock.path))
    assert result.status == "error" and "data.bin" in result.error and "sha256 checksum mismatch" in result.error
    assert not (data_dir / "raw" / "pinned").exists()


def test_mirror_missing_a_pinned_file_is_an_error(tmp_path, write_manifest, data_dir, lock):
    manifest = write_manifest("partial", {"kind": "zenodo", "record": 6})
    full = mirror_with(tmp_path / "a", "partial", {"a.bin": b"a", "b.bin": b"b"})
    assert fetch_dataset(manifest, data_dir, mirror=full, lock=lock).status == "fetched"
    (data_dir / "raw" / "partial").rename(tmp_path / "moved-away")
    half = mirror_with(tmp_path / "b", "partial", {"a.bin": b"a"})
    result = fetch_dataset(manifest, data_dir, mirror=half, lock=LockFile(lock.path))
    assert result.status == "error" and "no longer provided" in result.error and "b.bin" in result.error


def test_mirror_file_is_checked_against_the_digests_its_manifest_states(tmp_path, write_manifest, data_dir, lock):
    """A url file whose manifest states sha256 or md5 is verified when it comes from the mirror, as a download is;
    the dataset with the wrong copy fails in one sentence naming the file and both digests, the others go on."""
    import hashlib

    from mmbu.build.fetch import fetch_all

    good, bad = b"the published bytes", b"a different file under the same name"
    by_sha = write_manifest("by_sha", {"kind": "url", "files": [
        {"url": "https://host.invalid/a.bin", "sha256": sha256(good)}]})
    by_md5 = write_manifest("by_md5", {"kind": "url", "files": [
        {"url": "https://host.invalid/b.bin", "md5": hashlib.md5(good).hexdigest()}]})
    fine = write_manifest("fine", {"kind": "url", "files": [
        {"url": "https://host.invalid/c.bin", "sha256": sha256(good)}]})
    mirror = mirror_with(tmp_path, "by_sha", {"a.bin": bad})
    mirror_with(tmp_path, "by_md5", {"b.bin": bad})
    mirror_with(tmp_path, "fine", {"c.bin": good})
    paths = [data_dir.parent / "repo" / "manifests" / "datasets" / f"{m.id}.yaml" for m in (by_sha, by_md5, fine)]

    results = {r.dataset_id: r for r in fetch_all(paths, data_dir, mirror=mirror, lock=lock)}

    assert results["by_sha"].status == "error"
    assert results["by_sha"].error == (
        f"a.bin from the mirror: sha256 checksum mismatch with the manifest (it states {sha256(good)}, the mirror's "
        f"file has {sha256(bad)}); the bad file was removed")
    assert results["by_md5"].status == "error"
    assert hashlib.md5(good).hexdigest() in results["by_md5"].error
    assert hashlib.md5(bad).hexdigest() in results["by_md5"].error and "md5 checksum mismatch" in results["by_md5"].error
    assert results["fine"].status == "fetched" and results["fine"].fetched_from == "mirror"
    assert not (data_dir / "raw" / "by_sha").exists() and not (data_dir / "raw" / "by_md5").exists()
    assert (data_dir / "raw" / "fine" / "c.bin").read_bytes() == good
    assert lock.pins_for("by_sha", by_sha.source.model_dump(mode="json", exclude_none=True)) == {}

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

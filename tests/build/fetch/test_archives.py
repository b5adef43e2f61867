"""Safe extraction: traversal, absolute paths, links, bombs, caps, and multi-file layouts (MRXS)."""
from __future__ import annotations

import gzip
import io
import stat
import tarfile
import zipfile

import pytest
from support.fetch_hosts import make_tar, make_zip
from support.loopback import Reply

from mmbu.build.fetch import ExtractLimits, FetchError, extract_archive, fetch_dataset


def write(path, data: bytes):
    path.write_bytes(data)
    return path


def test_mrxs_file_and_its_folder_come_out_intact(tmp_path):
    members = {"slides/case1.mrxs": b"[GENERAL]", "slides/case1/Slidedat.ini": b"[HIERARCHICAL]",
               "slides/case1/Data0000.dat": b"\xff\xd8tiles", "slides/case1/Index.dat": b"index"}
    target = tmp_path / "out"
    written = extract_archive(write(tmp_path / "wsi.zip", make_zip(members)), target)
    assert sorted(written) == sorted(members)
    for name, data in members.items():
        assert (target / name).read_bytes() == data


@pytest.mark.parametrize("mode,suffix", [("w", ".tar"), ("w:gz", ".tar.gz"), ("w:bz2", ".tar.bz2"),
                                         ("w:xz", ".tar.xz")])
def test_tar_flavours_extract(tmp_path, mode, suffix):
    archive = write(tmp_path / f"data{suffix}", make_tar({"a/b.txt": b"hello", "c.txt": b"world"}, mode))
    extract_archive(archive, tmp_path / "out")
    assert (tmp_path / "out" / "a" / "b.txt").read_bytes() == b"hello"
    assert (tmp_path / "out" / "c.txt").read_bytes() == b"world"


@pytest.mark.parametrize("name", ["../evil.txt", "ok/../../evil.txt"])
def test_zip_members_climbing_out_are_refused(tmp_path, name):
    archive = write(tmp_path / "bad.zip", make_zip({"fine.txt": b"x", name: b"pwned"}))
    with pytest.raises(FetchError, match="climbs out"):
        extract_archive(archive, tmp_path / "out")
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path / "out" / "fine.txt").exists()


def test_absolute_tar_member_is_refused(tmp_path):
    archive = write(tmp_path / "bad.tar.gz", make_tar({"/etc/evil.conf": b"x"}))
    with pytest.raises(FetchError, match="absolute path"):
        extract_archive(archive, tmp_path / "out")


def test_tar_symlink_and_hardlink_members_are_refused(tmp_path):
    for kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as bundle:
            link = tarfile.TarInfo("images/link.png")
            link.type, link.linkname = kind, "/etc/passwd"
            bundle.addfile(link)
        archive = write(tmp_path / "links.tar", buffer.getvalue())
        with pytest.raises(FetchError, match="link or special file"):
            extract_archive(archive, tmp_path / "out")
        assert not (tmp_path / "out" / "images").exists()


def test_tar_device_member_is_refused(tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as bundle:
        device = tarfile.TarInfo("dev/null")
        device.type = tarfile.CHRTYPE
        bundle.addfile(device)
    with pytest.raises(FetchError, match="link or special file"):
        extract_archive(write(tmp_path / "dev.tar", buffer.getvalue()), tmp_path / "out")


def test_zip_symlink_member_is_refused(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        info = zipfile.ZipInfo("images/link.png")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        bundle.writestr(info, "/etc/passwd")
    with pytest.raises(FetchError, match="link or special file"):
        extract_archive(write(tmp_path / "link.zip", buffer.getvalue()), tmp_path / "out")


def test_zip_bomb_is_stopped_by_the_ratio_cap(tmp_path):
    bomb = make_zip({"zeros.bin": bytes(20 * 1024 * 1024)})
    assert len(bomb) < 100_000
    with pytest.raises(FetchError, match="archive bomb"):
        extract_archive(write(tmp_path / "bomb.zip", bomb), tmp_path / "out")
    assert not (tmp_path / "out" / "zeros.bin").exists()


def test_compressed_tar_bomb_is_stopped_by_the_ratio_cap(tmp_path):
    bomb = make_tar({"zeros.bin": bytes(8 * 1024 * 1024)}, "w:gz")
    with pytest.raises(FetchError, match="archive bomb"):
        extract_archive(write(tmp_path / "bomb.tar.gz", bomb), tmp_path / "out")


def test_total_size_cap(tmp_path):
    archive = write(tmp_path / "big.zip", make_zip({"a.bin": b"x" * 1000, "b.bin": b"y" * 1000},
                                                   compression=zipfile.ZIP_STORED))
    with pytest.raises(FetchError, match="more than the 1500 allowed"):
        extract_archive(archive, tmp_path / "out", ExtractLimits(max_total_bytes=1500))


def test_archive_may_not_overwrite_another_file(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    (target / "labels.csv").write_text("original")
    with pytest.raises(FetchError, match="would overwrite labels.csv"):
        extract_archive(write(tmp_path / "x.zip", make_zip({"labels.csv": b"other"})), target)
    assert (target / "labels.csv").read_text() == "original"


def test_fetch_refuses_a_dataset_with_a_traversal_archive(loopback, write_manifest, data_dir, session):
    loopback.add("GET", "/evil.zip", Reply(
        200, make_zip({"../../outside.txt": b"pwned"})))
    manifest = write_manifest("evil", {"kind": "url", "files": [{"url": f"{loopback.url}/evil.zip"}]})
    result = fetch_dataset(manifest, data_dir, session=session)
    assert result.status == "error" and "evil.zip" in result.error and "climbs out" in result.error
    assert not (data_dir / "raw" / "evil").exists()
    assert not list(data_dir.rglob("outside.txt")) and not (data_dir.parent / "outside.txt").exists()


def test_an_error_page_served_as_a_zip_is_caught(loopback, write_manifest, data_dir, session):
    loopback.add("GET", "/data.zip", Reply(200, "<!DOCTYPE html><html><body>Quota exceeded</body></html>",
                                           {"Content-Type": "text/html"}))
    manifest = write_manifest("htmlzip", {"kind": "url", "files": [{"url": f"{loopback.url}/data.zip"}]})
    result = fetch_dataset(manifest, data_dir, session=session)
    assert result.status == "error" and "data.zip is named like an archive but is not one" in result.error
    assert "<!DOCTYPE html>" in result.error
    assert not (data_dir / "raw" / "htmlzip").exists()


def test_plain_compressed_files_are_not_unpacked(loopback, write_manifest, data_dir, session):
    volume = gzip.compress(b"\x5c\x01\x00\x00 fake nifti header")
    loopback.add("GET", "/brain.nii.gz", Reply(200, volume))
    manifest = write_manifest("nifti", {"kind": "url", "files": [{"url": f"{loopback.url}/brain.nii.gz"}]})
    assert fetch_dataset(manifest, data_dir, session=session).status == "fetched"
    assert (data_dir / "raw" / "nifti" / "brain.nii.gz").read_bytes() == volume

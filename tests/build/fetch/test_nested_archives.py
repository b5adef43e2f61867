"""Archives inside a fetched archive: extracted when the manifest names them, with the same safety checks."""
from __future__ import annotations

import zipfile

import pytest
from pydantic import ValidationError
from support.fetch_hosts import make_tar, make_zip
from support.loopback import Reply

from mmbu.build.fetch import ExtractLimits, fetch_dataset
from mmbu.build.fetch.model import COMPLETION_RECORD

MENDELEY = "/public-api/zip/wg4bpm33hj/download/2"


def ccagt_archive() -> bytes:
    """CCAgT (Mendeley wg4bpm33hj v2, CC BY-NC 3.0): the download is one zip with the root `wg4bpm33hj-2/` holding
    `CCAgT_COCO_OD.json` and one zip per slide in `images/` and `masks/`, which the loader extracts beside themselves,
    giving `images/<slide>/<tile>.jpg` and `masks/<slide>/<tile>.png`; tiles are named `<slide>_...`
    (constantinpape/torch-em@6f71247c0bde24cb050bb25501ca61517ce08b7f:torch_em/data/datasets/light_microscopy/ccagt.py:
    URL, ARCHIVE_ROOT, `_extract_archive`, `name.split("_")[0]`). The per-slide zip names are not in the loader;
    `A.zip`, `B.zip` stand for them."""
    members = {"wg4bpm33hj-2/CCAgT_COCO_OD.json": b'{"images": [], "annotations": []}'}
    for slide in ("A", "B"):
        members[f"wg4bpm33hj-2/images/{slide}.zip"] = make_zip({f"{slide}/{slide}_000.jpg": b"\xff\xd8jpeg " + slide.encode()})
        members[f"wg4bpm33hj-2/masks/{slide}.zip"] = make_zip({f"{slide}/{slide}_000.png": b"\x89PNG mask " + slide.encode()})
    return make_zip(members, compression=zipfile.ZIP_STORED)


CCAGT_SOURCE = {"kind": "url", "nested_archives": ["wg4bpm33hj-2/images/*.zip", "wg4bpm33hj-2/masks/*.zip"]}


def test_ccagt_slide_zips_inside_the_download_are_extracted_beside_themselves(loopback, write_manifest, data_dir,
                                                                              session):
    loopback.add("GET", MENDELEY, Reply(200, ccagt_archive()))
    source = {**CCAGT_SOURCE, "files": [{"url": f"{loopback.url}{MENDELEY}", "name": "ccagt.zip"}]}
    manifest = write_manifest("ccagt", source, licence="CC-BY-NC-3.0")
    result = fetch_dataset(manifest, data_dir, session=session)

    assert result.status == "fetched", result.error
    raw = data_dir / "raw" / "ccagt" / "wg4bpm33hj-2"
    assert (raw / "images" / "A" / "A_000.jpg").read_bytes() == b"\xff\xd8jpeg A"
    assert (raw / "masks" / "B" / "B_000.png").read_bytes() == b"\x89PNG mask B"
    assert not list(raw.rglob("*.zip"))  # inner archives are removed once extracted, like the outer one
    assert fetch_dataset(manifest, data_dir, session=session).status == "up_to_date"  # the record lists what is there
    assert "images/A/A_000.jpg" in (data_dir / "raw" / "ccagt" / COMPLETION_RECORD).read_text()


def test_aul_pathology_zips_are_extracted_into_a_folder_of_their_own_name(loopback, write_manifest, data_dir, session):
    """AUL liver ultrasound (Zenodo 7272660): the archive holds `Benign.zip`, `Malignant.zip`, `Normal.zip`, each
    unpacked into a folder of its name, giving `Benign/Benign/image/194.jpg` and
    `Benign/Benign/segmentation/outline/56.json` (CAMMA-public/UltraSam@458ec794a246460b92ea3263ca8a80c67c1ac20e:
    datasets/datasets/AUL.py). The outer archive's name is the converter's default `AUL.zip`."""
    inner = {name: make_zip({f"{name}/image/194.jpg": b"\xff\xd8" + name.encode(),
                             f"{name}/segmentation/outline/56.json": b"[[1, 2], [3, 4], [5, 1]]"})
             for name in ("Benign", "Malignant", "Normal")}
    loopback.add("GET", "/AUL.zip", Reply(200, make_zip({f"{name}.zip": data for name, data in inner.items()})))
    source = {"kind": "url", "files": [{"url": f"{loopback.url}/AUL.zip"}],
              "nested_archives": [{"archives": "*.zip", "into": "folder"}]}
    result = fetch_dataset(write_manifest("aul_liver", source), data_dir, session=session)

    assert result.status == "fetched", result.error
    raw = data_dir / "raw" / "aul_liver"
    assert (raw / "Benign" / "Benign" / "image" / "194.jpg").read_bytes() == b"\xff\xd8Benign"
    assert (raw / "Normal" / "Normal" / "segmentation" / "outline" / "56.json").is_file()
    assert sorted(p.name for p in raw.iterdir() if p.name != COMPLETION_RECORD) == ["Benign", "Malignant", "Normal"]


def test_an_inner_archive_gets_the_same_path_and_link_checks_and_nothing_is_left_half_done(
        loopback, write_manifest, data_dir, session):
    evil = make_tar({"../../../outside.txt": b"pwned"}, "w:gz")
    loopback.add("GET", "/outer.zip", Reply(200, make_zip({"parts/evil.tar.gz": evil, "parts/ok.txt": b"fine"})))
    source = {"kind": "url", "files": [{"url": f"{loopback.url}/outer.zip"}], "nested_archives": ["parts/*.tar.gz"]}
    result = fetch_dataset(write_manifest("nested_evil", source), data_dir, session=session)

    assert result.status == "error" and "evil.tar.gz" in result.error and "climbs out" in result.error
    assert not (data_dir / "raw" / "nested_evil").exists()
    assert not list(data_dir.parent.rglob("outside.txt"))


def test_inner_archives_count_against_the_dataset_size_cap(loopback, write_manifest, data_dir, session):
    inner = make_zip({"a.bin": bytes(range(256)) * 12})  # 3072 bytes packed to a few hundred: each level passes
    assert len(inner) < 1000
    loopback.add("GET", "/outer.zip", Reply(200, make_zip({"inner.zip": inner}, compression=zipfile.ZIP_STORED)))
    source = {"kind": "url", "files": [{"url": f"{loopback.url}/outer.zip"}], "nested_archives": ["inner.zip"]}
    manifest = write_manifest("nested_big", source)
    result = fetch_dataset(manifest, data_dir, session=session, limits=ExtractLimits(max_total_bytes=1000))

    assert result.status == "error" and "inner archive inner.zip would bring the dataset to 3072 bytes" in result.error
    assert "more than the 1000 allowed" in result.error and not (data_dir / "raw" / "nested_big").exists()


def test_a_nested_pattern_matching_nothing_or_no_archive_is_one_sentence(loopback, write_manifest, data_dir, session):
    loopback.add("GET", "/outer.zip", Reply(200, make_zip({"images/part_1.zip": make_zip({"x.png": b"png"}),
                                                           "images/readme.txt": b"text"})))
    url = f"{loopback.url}/outer.zip"
    typo = write_manifest("nested_typo", {"kind": "url", "files": [{"url": url}], "nested_archives": ["image/*.zip"]})
    result = fetch_dataset(typo, data_dir, session=session)
    assert result.error == ("nested_archives 'image/*.zip' matches no file among the extracted ones; did you mean "
                            "'images/part_1.zip'?")
    text = write_manifest("nested_text", {"kind": "url", "files": [{"url": url}], "nested_archives": ["images/*.txt"]})
    assert fetch_dataset(text, data_dir, session=session).error == (
        "nested_archives 'images/*.txt' matches images/readme.txt, which is not a zip or tar archive")


@pytest.mark.parametrize("entry, message", [
    ("../elsewhere/*.zip", "climbs out with '..'"),
    ({"archives": "/abs/*.zip"}, "is absolute"),
    ({"archives": "*.zip", "into": "inside"}, "Input should be 'beside' or 'folder'"),
    ({"archive": "*.zip"}, "archive: Extra inputs are not permitted; did you mean 'archives'"),
])
def test_nested_archive_entries_are_checked(write_manifest, entry, message):
    with pytest.raises(Exception, match=message):
        write_manifest("nested_bad", {"kind": "url", "files": [{"url": "https://example.org/a.zip"}],
                                      "nested_archives": [entry]})


def test_a_manifest_without_nested_archives_keeps_its_source_identity():
    from mmbu.curation.manifest.source import UrlSource

    source = UrlSource(kind="url", files=[{"url": "https://example.org/a.zip"}])
    assert source.model_dump(mode="json", exclude_none=True) == {"kind": "url", "files": [{"url": "https://example.org/a.zip"}]}
    with pytest.raises(ValidationError):
        UrlSource(kind="url", files=[{"url": "https://example.org/a.zip"}], nested_archives=[])

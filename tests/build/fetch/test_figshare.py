"""figshare articles through MMBU_FIGSHARE_URL (a synthetic article on the loopback server): the version resolved
and pinned, figshare's computed_md5 verified, the licence re-checked, a missing file named, offline in one line."""
from __future__ import annotations

import json
import re
import shutil

import yaml
from click.testing import CliRunner
from support.fetch_hosts import make_zip, md5, serve_figshare_article, sha256
from support.loopback import Reply, closed_port_url

from mmbu.build.fetch import COMPLETION_RECORD, LockFile, fetch_dataset
from mmbu.build.fetch.plan import plan_fetch
from mmbu.cli import cli

IMAGES = make_zip({"fracture/img_001.png": b"\x89PNG fake 1", "normal/img_002.png": b"\x89PNG fake 2"})
LABELS = b"file,label\nimg_001.png,fracture\n"


def test_unpinned_version_is_resolved_pinned_and_enforced(loopback, monkeypatch, write_manifest, data_dir, lock,
                                                          session):
    monkeypatch.setenv("MMBU_FIGSHARE_URL", loopback.url)
    serve_figshare_article(loopback, 4242, {1: {"old.csv": b"old"}, 2: {"images.zip": IMAGES, "labels.csv": LABELS}})
    manifest = write_manifest("wrist", {"kind": "figshare", "article": 4242})
    assert manifest.source.version is None

    first = fetch_dataset(manifest, data_dir, lock=lock, session=session)

    assert first.status == "fetched", first.error
    assert first.fetched_from == "figshare" and first.resolved == {"version": 2}
    raw = data_dir / "raw" / "wrist"
    assert (raw / "fracture" / "img_001.png").read_bytes() == b"\x89PNG fake 1"
    assert (raw / "labels.csv").read_bytes() == LABELS and not (raw / "images.zip").exists()
    record = json.loads((raw / COMPLETION_RECORD).read_text())
    assert {f["name"]: f["md5"] for f in record["files"]} == {"images.zip": md5(IMAGES), "labels.csv": md5(LABELS)}
    identity = manifest.source.model_dump(mode="json", exclude_none=True)
    written = yaml.safe_load(lock.path.read_text())["datasets"]["wrist"]
    assert written["resolved"] == {"version": 2}
    assert {name: pin["sha256"] for name, pin in written["files"].items()} == {"images.zip": sha256(IMAGES),
                                                                            "labels.csv": sha256(LABELS)}

    # figshare publishes version 3; raw/ is lost. The next fetch keeps to version 2 without asking for the current one.
    serve_figshare_article(loopback, 4242, {2: {"images.zip": IMAGES, "labels.csv": LABELS},
                                            3: {"labels.csv": b"file,label\n"}})
    shutil.rmtree(raw)
    loopback.requests.clear()
    again = fetch_dataset(manifest, data_dir, lock=LockFile(lock.path), session=session)
    assert again.status == "fetched", again.error
    assert (raw / "labels.csv").read_bytes() == LABELS
    assert not loopback.requests_to("/v2/articles/4242") and loopback.requests_to("/v2/articles/4242/versions/2")
    assert LockFile(lock.path).resolved_for("wrist", identity) == {"version": 2}


def test_a_stated_version_and_file_subset_are_used_as_is(loopback, monkeypatch, write_manifest, data_dir, lock,
                                                         session):
    monkeypatch.setenv("MMBU_FIGSHARE_URL", loopback.url)
    serve_figshare_article(loopback, 77, {1: {"images.zip": IMAGES, "labels.csv": LABELS}, 2: {"labels.csv": b"x"}})
    manifest = write_manifest("pinned", {"kind": "figshare", "article": 77, "version": 1, "files": ["labels.csv"]})
    result = fetch_dataset(manifest, data_dir, lock=lock, session=session)
    assert result.status == "fetched", result.error
    assert result.resolved == {} and "resolved" not in lock.path.read_text()
    assert (data_dir / "raw" / "pinned" / "labels.csv").read_bytes() == LABELS
    assert not loopback.requests_to("/v2/articles/77")
    assert [r.path for r in loopback.requests if r.path.startswith("/ndownloader/")] == ["/ndownloader/files/7711"]


def test_an_article_of_more_files_than_a_record_lists_is_read_page_by_page(loopback, monkeypatch, write_manifest,
                                                                          data_dir, session):
    # the version's record lists only its first ten files; the wanted ones lie beyond them
    monkeypatch.setenv("MMBU_FIGSHARE_URL", loopback.url)
    parts = {f"part_{n:03d}.csv": f"file,label\nimg_{n}.png,normal\n".encode() for n in range(230)}
    serve_figshare_article(loopback, 99, {1: parts})
    manifest = write_manifest("many", {"kind": "figshare", "article": 99, "version": 1,
                                       "files": ["part_017.csv", "part_229.csv"]})

    result = fetch_dataset(manifest, data_dir, session=session)

    assert result.status == "fetched", result.error
    raw = data_dir / "raw" / "many"
    assert (raw / "part_229.csv").read_bytes() == parts["part_229.csv"]
    assert sorted(p.name for p in raw.glob("*.csv")) == ["part_017.csv", "part_229.csv"]
    pages = [(r.arg("page"), r.arg("page_size")) for r in loopback.requests_to("/v2/articles/99/versions/1/files")]
    assert pages == [("1", "100"), ("2", "100"), ("3", "100")]

    everything = fetch_dataset(write_manifest("all", {"kind": "figshare", "article": 99, "version": 1}), data_dir,
                               session=session)
    assert everything.status == "fetched", everything.error
    assert len(list((data_dir / "raw" / "all").glob("*.csv"))) == 230


def test_a_host_without_the_paged_file_list_gives_the_records_own_list(loopback, monkeypatch, write_manifest,
                                                                        data_dir, session):
    monkeypatch.setenv("MMBU_FIGSHARE_URL", loopback.url)
    serve_figshare_article(loopback, 98, {1: {"images.zip": IMAGES, "labels.csv": LABELS}})
    loopback.add("GET", "/v2/articles/98/versions/1/files", Reply(404, {"message": "Entity not found"}))
    result = fetch_dataset(write_manifest("older_api", {"kind": "figshare", "article": 98, "version": 1}), data_dir,
                           session=session)
    assert result.status == "fetched", result.error
    assert (data_dir / "raw" / "older_api" / "labels.csv").read_bytes() == LABELS


def test_a_corrupted_download_fails_its_md5_and_leaves_nothing(loopback, monkeypatch, write_manifest, data_dir,
                                                               session):
    monkeypatch.setenv("MMBU_FIGSHARE_URL", loopback.url)
    serve_figshare_article(loopback, 8, {1: {"labels.csv": LABELS}}, checksums={"labels.csv": md5(b"other bytes")})
    result = fetch_dataset(write_manifest("bad_md5", {"kind": "figshare", "article": 8, "version": 1}), data_dir,
                           session=session)
    assert result.status == "error"
    assert "labels.csv" in result.error and "md5 checksum mismatch" in result.error
    assert not (data_dir / "raw" / "bad_md5").exists()
    assert not list((data_dir / "downloads").rglob("*.part"))


def test_a_licence_change_is_refused_before_any_download(loopback, monkeypatch, write_manifest, data_dir, session):
    monkeypatch.setenv("MMBU_FIGSHARE_URL", loopback.url)
    serve_figshare_article(loopback, 10, {1: {"labels.csv": LABELS}}, licence={
        "value": 3, "name": "CC BY-NC 4.0", "url": "https://creativecommons.org/licenses/by-nc/4.0/"})
    result = fetch_dataset(write_manifest("relicensed", {"kind": "figshare", "article": 10, "version": 1}), data_dir,
                           session=session)
    assert result.status == "error" and "licence changed" in result.error
    assert "figshare article 10 version 1" in result.error
    assert "CC-BY-NC-4.0" in result.error and "the manifest says CC-BY-4.0" in result.error
    assert [r.path for r in loopback.requests] == ["/v2/articles/10/versions/1"]


def test_a_licence_is_read_by_its_url_then_by_its_name(loopback, monkeypatch, write_manifest, data_dir, session):
    monkeypatch.setenv("MMBU_FIGSHARE_URL", loopback.url)
    serve_figshare_article(loopback, 11, {1: {"labels.csv": LABELS}}, licence={
        "value": 2, "name": "CC0", "url": "https://creativecommons.org/publicdomain/zero/1.0/"})
    serve_figshare_article(loopback, 12, {1: {"labels.csv": LABELS}}, licence={"value": 5, "name": "MIT", "url": ""})
    serve_figshare_article(loopback, 13, {1: {"labels.csv": LABELS}}, licence=None)
    assert fetch_dataset(write_manifest("cc0", {"kind": "figshare", "article": 11, "version": 1}, licence="CC0-1.0"),
                         data_dir, session=session).status == "fetched"
    assert fetch_dataset(write_manifest("mit", {"kind": "figshare", "article": 12, "version": 1}, licence="MIT"),
                         data_dir, session=session).status == "fetched"
    unlicensed = fetch_dataset(write_manifest("none", {"kind": "figshare", "article": 13, "version": 1}), data_dir,
                               session=session)
    assert unlicensed.status == "error" and "figshare article 13 version 1 no longer states a licence" in unlicensed.error


def test_a_file_the_article_does_not_list_is_named(loopback, monkeypatch, write_manifest, data_dir, session):
    monkeypatch.setenv("MMBU_FIGSHARE_URL", loopback.url)
    serve_figshare_article(loopback, 13, {1: {"labels.csv": LABELS}, 2: {"labels.csv": LABELS, "masks.zip": IMAGES}})
    manifest = write_manifest("nomask", {"kind": "figshare", "article": 13, "version": 1, "files": ["masks.zip"]})
    result = fetch_dataset(manifest, data_dir, session=session)
    assert result.status == "error"
    assert result.error == "figshare article 13 version 1 has no file(s) masks.zip (it has: labels.csv)"


def test_an_embargoed_article_says_why_it_has_no_files(loopback, monkeypatch, write_manifest, data_dir, session):
    monkeypatch.setenv("MMBU_FIGSHARE_URL", loopback.url)
    serve_figshare_article(loopback, 14, {1: {"labels.csv": LABELS}})
    record = next(h for m, p, h, _ in loopback.routes if p == "/v2/articles/14/versions/1")
    del record.body["files"]
    result = fetch_dataset(write_manifest("embargoed", {"kind": "figshare", "article": 14, "version": 1}), data_dir,
                           session=session)
    assert result.status == "error" and "figshare article 14 version 1 lists no files" in result.error
    assert "embargo" in result.error


def test_the_plan_reads_names_and_sizes_from_the_article(loopback, monkeypatch, write_manifest, manifests_dir,
                                                         data_dir, session):
    monkeypatch.setenv("MMBU_FIGSHARE_URL", loopback.url)
    serve_figshare_article(loopback, 15, {1: {"labels.csv": LABELS}, 2: {"images.zip": IMAGES, "labels.csv": LABELS}})
    write_manifest("planned", {"kind": "figshare", "article": 15})
    planned = plan_fetch(sorted(manifests_dir.glob("*.yaml")), data_dir, session=session).by_id()["planned"]
    assert planned.state == "to_fetch" and planned.hosts == [loopback.url.removeprefix("http://")]
    assert {(f.name, f.size, f.basis) for f in planned.files} == {("images.zip", len(IMAGES), "figshare"),
                                                                  ("labels.csv", len(LABELS), "figshare")}


def test_offline_the_figshare_host_is_one_line_naming_its_datasets(monkeypatch, write_manifest, manifests_dir,
                                                                   tmp_path):
    dead = closed_port_url()
    monkeypatch.setenv("MMBU_FIGSHARE_URL", dead)
    write_manifest("fig_a", {"kind": "figshare", "article": 1})
    write_manifest("fig_b", {"kind": "figshare", "article": 2, "version": 3})
    result = CliRunner().invoke(cli, ["fetch", "--manifests", str(manifests_dir), "--data", str(tmp_path / "d")])
    assert result.exit_code == 1, result.output
    lines = re.findall(r"^✗ host (\S+) is unreachable \(connection refused\): (\d) dataset\(s\) not fetched: (.+?) "
                       r"\(details: ", result.output, flags=re.M)
    assert lines == [(dead.removeprefix("http://"), "2", "fig_a, fig_b")], result.output
    assert "Traceback" not in result.output


def test_a_host_file_name_leaving_the_dataset_folder_is_refused(loopback, monkeypatch, write_manifest, data_dir,
                                                                session, tmp_path):
    """A hostile article lists '../../escaped.csv': nothing is written outside raw/<id>/ or anywhere else."""
    monkeypatch.setenv("MMBU_FIGSHARE_URL", loopback.url)
    serve_figshare_article(loopback, 9, {1: {"../../escaped.csv": LABELS}})
    result = fetch_dataset(write_manifest("hostile", {"kind": "figshare", "article": 9, "version": 1}), data_dir,
                           session=session)
    assert result.status == "error"
    assert "../../escaped.csv" in result.error and "climbs out" in result.error
    assert not [p for p in tmp_path.rglob("escaped.csv")] and not (data_dir / "raw" / "hostile").exists()
    assert not [r for r in loopback.requests if r.path.startswith("/ndownloader/")]

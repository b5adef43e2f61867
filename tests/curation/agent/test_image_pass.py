"""`mmbu discover` with Zenodo's second pass for records uploaded as images, against the replayed API."""
import copy
import json
import re

from click.testing import CliRunner

from mmbu.cli import cli
from support.loopback import Reply


def run_discover(tmp_path, taxonomy_path):
    out = tmp_path / "candidates.jsonl"
    args = ["discover", "--sources", "zenodo", "--out", str(out), "--taxonomy", str(taxonomy_path),
            "--max-queries", "12", "--accepted-dir", str(tmp_path / "none"), "--cache", str(tmp_path / "cache"),
            "--rate", "200"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    lines = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return result, lines, out


def searches(server, **wanted):
    return [r for r in server.requests_to("/api/records") if all(r.arg(k) == v for k, v in wanted.items())]


def test_both_passes_are_requested_paged_screened_and_cached(apis, tmp_path, taxonomy_path):
    result, lines, out = run_discover(tmp_path, taxonomy_path)
    assert result.exit_code == 0, result.output  # the replay answers 400 to any argument Zenodo does not know

    first_pages = [r for r in apis.requests_to("/api/records") if r.arg("page") == "1"]
    for q in {r.arg("q") for r in first_pages}:  # every query went out in both passes, same q, same shape
        shapes = sorted({(r.arg("type"), tuple(sorted(r.query))) for r in first_pages if r.arg("q") == q})
        assert shapes == [("dataset", ("page", "q", "size", "sort", "type")),
                          ("image", ("page", "q", "size", "sort", "type"))]
    assert searches(apis, type="image", page="2")  # 3 chest image records span two replayed pages

    found = {c["id"]: c for c in lines}
    figure, ribs, films, light_box = (found[i] for i in ("11030001", "11030002", "11030003", "11030004"))
    assert (figure["resource_type"], figure["excluded"], figure["flags"]) == ("image-figure", True, ["too-few-images"])
    assert "1 image file (figure2.png)" in figure["reasons"][0]
    assert light_box["excluded"] and "3 image files" in light_box["reasons"][0]
    for kept in (ribs, films):  # 40 TIFFs; a 250 MB zip
        assert (kept["resource_type"], kept["excluded"], kept["flags"]) == ("image-photo", False, []), kept["reasons"]
        assert kept["queries"] and kept["score"] > 0
    assert found["11012345"]["resource_type"] == "dataset"
    assert "by resource type: dataset 6 (1 excluded), image-figure 1 (1 excluded), image-photo 3 (1 excluded)" \
        in result.output

    sent = len(apis.requests)
    again, _, _ = run_discover(tmp_path, taxonomy_path)
    assert again.exit_code == 0 and len(apis.requests) == sent  # both passes replayed from the raw-response cache
    assert out.read_text() == "".join(json.dumps(c, ensure_ascii=False, sort_keys=True) + "\n" for c in lines)


def test_a_record_found_by_both_passes_is_one_candidate(apis, tmp_path, taxonomy_path, replay_module):
    def records(base):  # the chest dataset also answers the image pass (re-typed since the dataset answer was cached)
        chest = next(h for h in replay_module.zenodo_records(base) if h["id"] == 11012345)
        retyped = copy.deepcopy(chest)
        retyped["metadata"]["resource_type"] = {"title": "Photo", "type": "image", "subtype": "photo"}
        return [*replay_module.zenodo_records(base), retyped]

    apis.add("GET", "/api/records", replay_module.zenodo_search(apis.url, throttle_first=False, records=records))
    result, lines, _ = run_discover(tmp_path, taxonomy_path)
    assert result.exit_code == 0, result.output
    served_twice = {r.arg("q") for r in searches(apis, type="image")} & {r.arg("q") for r in searches(apis, type="dataset")}
    assert any('"chest radiograph"' in q for q in served_twice)  # queries whose two passes both return the record
    chest = [c for c in lines if c["id"] == "11012345"]
    assert len(chest) == 1
    assert chest[0]["resource_type"] == "dataset"  # the pass that found it first
    assert len(chest[0]["queries"]) == len(set(chest[0]["queries"]))  # each query recorded once


def test_a_malformed_image_pass_page_is_reported_and_the_run_goes_on(apis, tmp_path, taxonomy_path, replay_module):
    replayed = replay_module.zenodo_search(apis.url, throttle_first=False)

    def search(request):
        if request.arg("type") == "image":  # Zenodo's image search answers with an error object instead of hits
            return Reply(200, {"message": "Search is temporarily unavailable"})
        return replayed(request)

    apis.add("GET", "/api/records", search)
    result, lines, _ = run_discover(tmp_path, taxonomy_path)
    assert result.exit_code == 1

    warnings = [line for line in result.output.splitlines() if line.startswith("warning: zenodo (type=image)")]
    assert re.fullmatch(r'warning: zenodo \(type=image\): query "chest radiograph" human segmentation: zenodo: the '
                        rf"answer from {re.escape(apis.url)}/api/records has no hits\.hits list; "
                        r"not a records search result", warnings[0]), warnings[0]
    assert warnings[-1].endswith("zenodo (type=image) failed 2 queries in a row; it is skipped for the rest of the run "
                                 "(rerun later: answers so far are cached)")
    assert len(warnings) == 3  # two failed queries, then the pass is left alone

    found = {c["id"]: c for c in lines}
    assert not any(c["resource_type"].startswith("image") for c in lines)
    assert {"11012345", "11020001", "11020005"} <= set(found)  # the dataset pass went on for every query
    image_queries = {r.arg("q") for r in searches(apis, type="image", page="1")}
    dataset_queries = {r.arg("q") for r in searches(apis, type="dataset", page="1")}
    assert image_queries < dataset_queries


def test_a_pass_page_cap_from_a_settings_file_limits_its_requests(apis, tmp_path, taxonomy_path):
    from mmbu.curation.data import DISCOVERY_PATH

    settings = tmp_path / "discovery.yaml"
    text = DISCOVERY_PATH.read_text()
    assert "    - {type: image}\n" in text
    settings.write_text(text.replace("    - {type: image}\n", "    - {type: image, max_pages: 1}\n"))
    out = tmp_path / "candidates.jsonl"
    result = CliRunner().invoke(cli, ["discover", "--sources", "zenodo", "--out", str(out), "--taxonomy",
                                      str(taxonomy_path), "--max-queries", "12", "--accepted-dir", str(tmp_path / "none"),
                                      "--cache", str(tmp_path / "cache"), "--rate", "200", "--settings", str(settings)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert searches(apis, type="image", page="1") and not searches(apis, type="image", page="2")
    assert searches(apis, type="dataset", page="1")


def test_a_broken_settings_file_is_bad_input_naming_it(tmp_path, taxonomy_path):
    settings = tmp_path / "discovery.yaml"
    settings.write_text("zenodo: {passes: [{type: image, max_pages: 0}]}\n")
    result = CliRunner().invoke(cli, ["discover", "--sources", "zenodo", "--out", str(tmp_path / "c.jsonl"),
                                      "--taxonomy", str(taxonomy_path), "--settings", str(settings)])
    assert result.exit_code == 2 and str(settings) in result.output

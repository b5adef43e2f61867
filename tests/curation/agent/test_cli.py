"""`mmbu discover` end to end against the replayed Zenodo, Hub, Kaggle and the committed PwC index."""
import json

from click.testing import CliRunner

from mmbu.cli import cli
from support.loopback import LoopbackServer, Reply

def run_discover(tmp_path, taxonomy_path, *extra):
    out = tmp_path / "candidates.jsonl"
    args = ["discover", "--sources", "zenodo,huggingface,kaggle,paperswithcode", "--out", str(out),
            "--taxonomy", str(taxonomy_path), "--max-queries", "60", "--accepted-dir", str(tmp_path / "none"),
            "--cache", str(tmp_path / "cache"), "--rate", "200", *extra]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    lines = out.read_text().splitlines() if out.exists() else []
    return result, {f"{c['source']}:{c['id']}": c for c in map(json.loads, lines)}, out

def test_discover_finds_screens_and_dedupes_across_all_four_sources(apis, tmp_path, taxonomy_path):
    result, found, out = run_discover(tmp_path, taxonomy_path)
    assert result.exit_code == 0, result.output

    for candidate in found.values():
        assert {"source", "id", "title", "url", "license", "flags", "excluded", "score", "queries",
                "also_found_in"} <= candidate.keys()
    assert {c["source"] for c in found.values()} == {"zenodo", "huggingface", "kaggle", "paperswithcode"}

    chest = found["zenodo:11012345"]
    assert (chest["license"], chest["flags"], chest["excluded"]) == ("CC-BY-4.0", [], False)
    assert chest["queries"] and chest["score"] > 0

    # one dataset on Zenodo, Kaggle (same title), the Hub (its paperswithcode_id) and PwC (homepage link)
    blood = found["zenodo:11020001"]
    assert blood["license"] == "CC0-1.0"  # legacy "cc-zero"
    assert {r["source"] + ":" + r["id"] for r in blood["also_found_in"]} == {
        "kaggle:micro/blood-smear-brightfield", "paperswithcode:blood-cell-smears", "huggingface:derm/blood-smear-brightfield"}
    assert "kaggle:micro/blood-smear-brightfield" not in found
    assert blood["flags"] == ["license-conflict"] and not blood["excluded"]  # the Kaggle copy says CC BY 4.0
    assert "its copy kaggle:micro/blood-smear-brightfield says CC-BY-4.0" in blood["reasons"][0]

    # a Hub dataset reached only through a PwC lead's data-loader link
    isic = found["huggingface:derm/isic-demo"]
    assert [r["id"] for r in isic["also_found_in"]] == ["isic-dermoscopy-demo"] and isic["license"] == "CC-BY-NC-4.0"

    # screening
    assert found["zenodo:11020003"]["flags"][0] == "unclear-license"  # null licence
    assert "unclear-license" in found["zenodo:11020004"]["flags"]  # no licence key
    assert found["huggingface:labs/chest-xray-llm-labels"]["excluded"]
    assert "machine-labels" in found["huggingface:labs/chest-xray-llm-labels"]["flags"]
    mixed = found["huggingface:labs/chest-xray-mixed-licence"]
    assert {"unclear-license", "license-conflict"} <= set(mixed["flags"])
    assert found["kaggle:other/chest-xray-report-costs"]["flags"] == ["unclear-license", "not-imaging"]
    chexpert = found["paperswithcode:chexpert"]
    assert chexpert["excluded"] and chexpert["flags"][0] == "unresolved-lead"

    # the exclusion list removes contaminated datasets, and they stay in the file with the reason
    contaminated = {ref for ref, c in found.items() if "contaminated" in c["flags"]}
    assert contaminated == {"zenodo:11020002", "huggingface:someorg/chest-xray-vqa-instruct", "paperswithcode:vqa-rad"}
    assert all(found[ref]["excluded"] for ref in contaminated)
    assert any("PathVQA" in reason for reason in found["zenodo:11020002"]["reasons"])
    assert "candidates" in result.output and str(out) in result.output

def test_rerun_replays_the_cache_and_writes_the_same_file(apis, tmp_path, taxonomy_path):
    _, _, out = run_discover(tmp_path, taxonomy_path)
    first = out.read_text()
    sent = len(apis.requests)
    result, _, out = run_discover(tmp_path, taxonomy_path)
    assert result.exit_code == 0 and out.read_text() == first
    assert len(apis.requests) == sent  # every answer came from the raw-response cache

def test_a_failing_source_is_reported_and_the_rest_goes_on(apis, tmp_path, taxonomy_path):
    apis.add("POST", "/v1/datasets.DatasetApiService/ListDatasets", Reply(404, "<html>Not Found</html>"))
    result, found, _ = run_discover(tmp_path, taxonomy_path)
    assert result.exit_code == 1
    assert "warning: kaggle: query" in result.output and "HTTP 404" in result.output
    assert "kaggle failed 2 queries in a row" in result.output  # then it is left alone
    assert len(apis.requests_to("/v1/datasets.DatasetApiService/ListDatasets")) == 2
    assert "zenodo:11012345" in found and not any(ref.startswith("kaggle:") for ref in found)

def test_llm_synonyms_and_relevance_are_cached(apis, tmp_path, taxonomy_path):
    def chat(request):
        prompt = request.json()["messages"][0]["content"]
        content = '["chest film"]' if "other names" in prompt else "8"
        return Reply(200, {"id": "c1", "object": "chat.completion", "model": "m",
                           "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                        "finish_reason": "stop"}]})

    apis.add("POST", "/llm/v1/chat/completions", chat)
    result, found, _ = run_discover(tmp_path, taxonomy_path, "--llm-base-url", f"{apis.url}/llm/v1")
    assert result.exit_code == 0, result.output
    assert found["zenodo:11012345"]["llm_relevance"] == 0.8
    assert any('"chest film"' in r.arg("q") for r in apis.requests_to("/api/records"))  # the LLM's synonym was searched
    calls = len(apis.requests_to("/llm/v1/chat/completions"))
    run_discover(tmp_path, taxonomy_path, "--llm-base-url", f"{apis.url}/llm/v1")
    assert len(apis.requests_to("/llm/v1/chat/completions")) == calls  # answers came from the LLM cache

def test_bad_usage_exits_2(tmp_path, taxonomy_path):
    result = CliRunner().invoke(cli, ["discover", "--sources", "zenodo,arxiv", "--out", str(tmp_path / "x.jsonl")])
    assert result.exit_code == 2 and "unknown source(s) arxiv" in result.output
    result = CliRunner().invoke(cli, ["discover", "--sources", "paperswithcode", "--out", str(tmp_path / "x.jsonl"),
                                      "--pwc-index", str(tmp_path / "missing.jsonl"), "--taxonomy", str(taxonomy_path)])
    assert result.exit_code == 2 and "missing.jsonl" in result.output and "Traceback" not in result.output
    assert "leave paperswithcode out of --sources" in result.output

def test_a_run_that_failed_midway_resumes_from_the_cache(apis, tmp_path, taxonomy_path, replay_module):
    apis.add("POST", "/v1/datasets.DatasetApiService/ListDatasets",
             Reply(200, "<html>Kaggle is down for maintenance</html>", {"Content-Type": "text/html"}))
    first, found, _ = run_discover(tmp_path, taxonomy_path)
    assert first.exit_code == 1 and not any(ref.startswith("kaggle:") for ref in found)
    zenodo_calls = len(apis.requests_to("/api/records"))

    replay_module.install_kaggle(apis)  # the host is back
    second, found, _ = run_discover(tmp_path, taxonomy_path)
    assert second.exit_code == 0, second.output
    assert "kaggle:someuser/chest-xray-pneumonia-demo" in found
    assert len(apis.requests_to("/api/records")) == zenodo_calls  # what was fetched before came from the cache

def test_an_llm_that_fails_is_reported_and_the_run_goes_on(apis, tmp_path, taxonomy_path):
    apis.add("POST", "/llm/v1/chat/completions", Reply(401, {"error": {"message": "invalid api key"}}))
    result, found, _ = run_discover(tmp_path, taxonomy_path, "--llm-base-url", f"{apis.url}/llm/v1")
    assert result.exit_code == 1 and "llm: no answer from" in result.output and "HTTP 401" in result.output
    assert found["zenodo:11012345"]["llm_relevance"] is None and found["zenodo:11012345"]["score"] > 0


def test_a_host_that_blocks_us_is_left_alone(apis, tmp_path, taxonomy_path, monkeypatch):
    with LoopbackServer() as zenodo:  # its own host: the breaker is per host
        zenodo.add("GET", "/api/records", Reply(403, "You are being blocked. Please contact us at: info@zenodo.org"))
        monkeypatch.setenv("MMBU_ZENODO_URL", zenodo.url)
        result, found, _ = run_discover(tmp_path, taxonomy_path)
        assert result.exit_code == 1 and "the host refused us" in result.output
        assert "zenodo is skipped for the rest of the run" in result.output
        assert len(zenodo.requests) == 1  # one refusal, then silence
    assert "huggingface:someorg/chest-xray-demo" in found and "kaggle:someuser/chest-xray-pneumonia-demo" in found

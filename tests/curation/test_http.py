"""The polite HTTP client against a real loopback server: waits, retries, breaker, cache, redaction."""
from __future__ import annotations

import threading
import time
from email.utils import format_datetime
from datetime import UTC, datetime

import pytest
from support.loopback import Reply, file_with_range

from mmbu.curation.http import (
    BlockedError,
    HostPolicy,
    HttpError,
    NotJsonError,
    PoliteSession,
    TransportError,
    redact_url,
    server_wait_seconds,
)

FAST = HostPolicy(requests_per_second=1000, burst=100, backoff_base=0.01, backoff_max=0.02,
                  connect_timeout=1, read_timeout=0.3, max_attempts=3, max_server_wait=5)


def session(tmp_path=None, policy: HostPolicy = FAST) -> PoliteSession:
    return PoliteSession({}, cache_dir=tmp_path, default_policy=policy)


def test_429_with_retry_after_seconds_is_honoured(loopback):
    loopback.add("GET", "/api/records", [Reply(429, {"message": "slow down"}, {"Retry-After": "1"}),
                                         Reply(200, {"hits": {"total": 0}})])
    started = time.monotonic()
    assert session().get_json(f"{loopback.url}/api/records") == {"hits": {"total": 0}}
    assert time.monotonic() - started >= 1.0
    assert len(loopback.requests_to("/api/records")) == 2


def test_hugging_face_ratelimit_header_is_honoured(loopback):
    loopback.add("GET", "/api/datasets", [Reply(429, "", {"RateLimit": '"api";r=0;t=1'}), Reply(200, [])])
    started = time.monotonic()
    assert session().get_json(f"{loopback.url}/api/datasets") == []
    assert time.monotonic() - started >= 1.0


def test_server_wait_reads_http_dates_and_reset_epochs():
    now = 1_800_000_000.0
    date = format_datetime(datetime.fromtimestamp(now + 30, UTC), usegmt=True)
    assert server_wait_seconds({"Retry-After": date}, now=now) == pytest.approx(30)
    assert server_wait_seconds({"X-RateLimit-Reset": str(int(now + 12))}, now=now) == pytest.approx(12)
    assert server_wait_seconds({"Retry-After": "3", "RateLimit": '"api";r=0;t=55'}, now=now) == 55
    assert server_wait_seconds({"Retry-After": "soon"}, now=now) is None


def test_500_then_200_is_retried(loopback):
    loopback.add("GET", "/x", [Reply(500, "oops"), Reply(200, {"ok": True})])
    assert session().get_json(f"{loopback.url}/x") == {"ok": True}
    assert len(loopback.requests_to("/x")) == 2


def test_post_is_retried_too(loopback):
    route = "/v1/datasets.DatasetApiService/ListDatasets"
    loopback.add("POST", route, [Reply(503, ""), Reply(200, {"datasets": []})])
    assert session().post_json(f"{loopback.url}{route}", json={"search": "x"}) == {"datasets": []}
    assert [r.json() for r in loopback.requests_to(route)] == [{"search": "x"}, {"search": "x"}]


def test_persistent_5xx_gives_up_with_a_readable_error(loopback):
    loopback.add("GET", "/x", Reply(502, "bad gateway"))
    with pytest.raises(HttpError) as caught:
        session().get_json(f"{loopback.url}/x")
    assert caught.value.status == 502 and "gave up after 3 attempts" in str(caught.value)
    assert len(loopback.requests_to("/x")) == 3


def test_retry_after_longer_than_the_cap_fails_at_once(loopback):
    loopback.add("GET", "/x", Reply(429, "", {"Retry-After": "3600"}))
    with pytest.raises(HttpError, match="wait 3600s"):
        session().get_json(f"{loopback.url}/x")
    assert len(loopback.requests_to("/x")) == 1


def test_403_opens_the_breaker_and_no_more_requests_go_out(loopback):
    loopback.add("GET", "/a", Reply(403, "Forbidden"))
    loopback.add("GET", "/b", Reply(200, {"ok": True}))
    client = session()
    with pytest.raises(BlockedError):
        client.get_json(f"{loopback.url}/a")
    with pytest.raises(BlockedError, match="blocked us earlier"):
        client.get_json(f"{loopback.url}/b")
    assert len(loopback.requests) == 1


def test_being_blocked_body_opens_the_breaker_even_on_429(loopback):
    loopback.add("GET", "/a", Reply(429, "You are being blocked. Please contact us at: info@zenodo.org"))
    with pytest.raises(BlockedError, match="You are being blocked"):
        session().get_json(f"{loopback.url}/a")
    assert len(loopback.requests) == 1


def test_html_instead_of_json_is_not_json_error(loopback):
    loopback.add("GET", "/api/v1/datasets/", Reply(200, "<!DOCTYPE html><html>Trending papers</html>",
                                                    {"Content-Type": "text/html"}))
    with pytest.raises(NotJsonError, match="text/html"):
        session().get_json(f"{loopback.url}/api/v1/datasets/")
    assert len(loopback.requests) == 1


def test_read_timeout_is_retried_then_reported(loopback):
    loopback.add("GET", "/slow", [Reply(200, {"late": True}, delay=0.6), Reply(200, {"ok": True})])
    assert session().get_json(f"{loopback.url}/slow") == {"ok": True}

    loopback.add("GET", "/always-slow", Reply(200, {}, delay=0.6))
    with pytest.raises(TransportError, match="timed out"):
        session(policy=FAST.model_copy(update={"max_attempts": 2})).get_json(f"{loopback.url}/always-slow")


def test_identifying_user_agent_is_sent(loopback):
    loopback.add("GET", "/x", Reply(200, {}))
    session().get_json(f"{loopback.url}/x")
    assert loopback.requests[0].headers["user-agent"].startswith("mmbu/")
    assert "+https://" in loopback.requests[0].headers["user-agent"]


def test_cache_hit_avoids_a_second_request(loopback, tmp_path):
    loopback.add("GET", "/api/records", Reply(200, {"hits": {"total": 1}}, {"Link": "<next>; rel=\"next\""}))
    first = session(tmp_path).request_json("GET", f"{loopback.url}/api/records", params={"q": "mri"})
    again = session(tmp_path).request_json("GET", f"{loopback.url}/api/records", params={"q": "mri"})
    other = session(tmp_path).request_json("GET", f"{loopback.url}/api/records", params={"q": "ct"})
    assert again.data == first.data and again.from_cache and not first.from_cache and not other.from_cache
    assert again.headers["Link"] == '<next>; rel="next"'
    assert len(loopback.requests_to("/api/records")) == 2


def test_credentials_never_reach_cache_files_or_errors(loopback, tmp_path):
    token = "hf_SECRETSECRETSECRET"
    loopback.add("GET", "/api/datasets", Reply(200, [{"id": "a/b"}]))
    loopback.add("GET", "/private", Reply(401, f"invalid token {token}"))
    client = session(tmp_path)
    client.get_json(f"{loopback.url}/api/datasets", params={"access_token": token},
                    headers={"Authorization": f"Bearer {token}"})
    assert loopback.requests[0].headers["authorization"] == f"Bearer {token}"
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert files and not any(token in p.read_text() or token in p.name for p in files)
    with pytest.raises(HttpError) as caught:
        client.get_json(f"{loopback.url}/private", headers={"Authorization": f"Bearer {token}"})
    assert token not in str(caught.value) and "***" in str(caught.value)
    assert token not in redact_url(f"{loopback.url}/x?access_token={token}&q=1")


def test_rate_cap_spaces_requests(loopback):
    loopback.add("GET", "/x", Reply(200, {}))
    client = session(policy=FAST.model_copy(update={"requests_per_second": 10, "burst": 1}))
    started = time.monotonic()
    for _ in range(4):
        client.get_json(f"{loopback.url}/x")
    assert time.monotonic() - started >= 0.29


def test_one_request_in_flight_per_host(loopback):
    loopback.add("GET", "/x", Reply(200, {}, delay=0.2))
    client = session()
    threads = [threading.Thread(target=client.get_json, args=(f"{loopback.url}/x",)) for _ in range(3)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert time.monotonic() - started >= 0.6
    assert len(loopback.requests_to("/x")) == 3


def test_stream_with_range_then_the_host_is_free_again(loopback):
    loopback.add("GET", "/file.bin", file_with_range(b"0123456789", etag='"v1"'))
    loopback.add("GET", "/x", Reply(200, {"ok": True}))
    client = session()
    with client.stream(f"{loopback.url}/file.bin", headers={"Range": "bytes=4-"}) as response:
        assert response.status_code == 206 and response.content == b"456789"
    assert client.get_json(f"{loopback.url}/x") == {"ok": True}


def test_low_remaining_quota_pauses_the_host_until_reset(loopback):
    reset = int(time.time()) + 2
    loopback.add("GET", "/x", [Reply(200, {"n": 1}, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)}),
                               Reply(200, {"n": 2})])
    client = session()
    client.get_json(f"{loopback.url}/x")
    client.get_json(f"{loopback.url}/x")
    assert time.time() >= reset - 0.05


def test_reserve_host_respects_the_breaker_and_the_host_lock(loopback):
    loopback.add("GET", "/a", Reply(403, "Forbidden"))
    client = session()
    with client.reserve_host(f"{loopback.url}/x") as policy:
        assert policy == FAST
    with pytest.raises(BlockedError):
        client.get_json(f"{loopback.url}/a")
    with pytest.raises(BlockedError):
        with client.reserve_host(f"{loopback.url}/x"):
            pass

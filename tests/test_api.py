"""The REST API: decisions, errors and health, through the app in this process; one request to the
real server on loopback (tests/test_hostile.py and test_fuzz.py hold the rest of the real-server checks)."""
import httpx
import pytest

from tests.conftest import in_process, small


def q(**kw):
    return {k: v for k, v in small(**kw).to_dict().items()}


@pytest.fixture(scope="module")
def client(swept_db):
    with in_process(swept_db[0]) as c:
        yield c


def test_get_decision_from_the_real_server(server):
    r = httpx.get(f"{server}/v1/decision", params=q(batch_size=4, kv_len=250))      # within the measured 4 x 256
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["source"] == "measured" and body["kernel"] == "torch-sdpa" and body["device"].startswith("CPU")


def test_post_decisions_in_order(client):
    probs = [q(batch_size=1, kv_len=64), q(batch_size=64, kv_len=64), q(head_dim=128)]
    r = client.post("/v1/decisions", json={"problems": probs})
    assert r.status_code == 200
    assert [d["source"] for d in r.json()["decisions"]] == ["measured", "learned", "rule"]
    assert r.json()["count"] == 3


def test_invalid_problem_is_422_naming_the_field(client):
    r = client.get("/v1/decision", params={**q(), "num_kv_heads": 3})
    assert r.status_code == 422
    (err,) = r.json()["detail"]
    assert err["loc"] == ["query", "num_qo_heads"] and "not divisible by num_kv_heads 3" in err["msg"]
    r = client.get("/v1/decision", params={**q(), "batch_size": "lots"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "batch_size"]
    r = client.post("/v1/decisions", json={"problems": [q(), {**q(), "kv_dtype": "fp4"}]})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "problems", 1, "kv_dtype"]


def test_a_prefill_without_q_len_is_422_naming_q_len(client):
    # it was decided as one new token per request, where `tuner decide --input` refused it
    prefill = {k: v for k, v in q(phase="prefill", q_len=64, kv_len=64).items() if k != "q_len"}
    r = client.get("/v1/decision", params=prefill)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "q_len"]
    assert r.json()["detail"][0]["msg"] == "q_len is required for prefill (the new tokens per request; 1 for one)"
    r = client.post("/v1/decisions", json={"problems": [q(), prefill]})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "problems", 1, "q_len"]
    assert client.get("/v1/decision", params={**prefill, "q_len": 64}).status_code == 200


def test_a_problem_no_kernel_can_serve_is_422_with_each_kernels_reason(client):
    # found by the fuzz test: attention sinks on the CPU, where only torch SDPA runs, was a 500
    r = client.get("/v1/decision", params={**q(), "has_sinks": "true"})
    assert r.status_code == 422, r.text
    (err,) = r.json()["detail"]
    assert err["loc"] == ["query"] and "no kernel can serve" in err["msg"]
    assert "torch-sdpa: attention sinks not supported" in err["msg"]
    r = client.post("/v1/decisions", json={"problems": [q(), {**q(), "has_sinks": True}]})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "problems", 1]
    assert client.get("/v1/decision", params=q()).status_code == 200     # the daemon is fine


def test_unknown_device_is_404_listing_known_ones(client):
    r = client.get("/v1/decision", params={**q(), "device": "NVIDIA B200"})
    assert r.status_code == 404 and "it holds: CPU" in r.json()["detail"]


def test_healthz_and_openapi(client):
    assert client.get("/healthz").json()["status"] == "ok"
    assert "/v1/decision" in client.get("/openapi.json").json()["paths"]


def test_a_query_whose_device_went_away_gets_the_routes_answer_not_a_500(swept_db):
    # the fast path (api/fast.py) answers a plain query itself; when its device is gone (a reload of
    # another database), the route must answer, with its 404
    class Gone:
        def get(self, device):
            raise ValueError(f"no measurements for device {device!r}; it holds: nothing")

    with in_process(swept_db[0]) as c:
        params = q(batch_size=3, kv_len=200)
        assert c.get("/v1/decision", params=params).status_code == 200
        real, c.app.state.dispatchers = c.app.state.dispatchers, Gone()
        r = c.get("/v1/decision", params=params)
        c.app.state.dispatchers = real                                       # for the shutdown
        assert r.status_code == 404 and "it holds: nothing" in r.json()["detail"]


def test_a_device_inside_a_problem_says_where_it_goes(client):
    """It was pydantic's bare "Extra inputs are not permitted"."""
    r = client.post("/v1/decisions", json={"problems": [{**q(), "device": "NVIDIA H200"}]})
    (e,) = r.json()["detail"]
    assert r.status_code == 422 and e["loc"] == ["body", "problems", 0]
    assert "'device' is not a problem's field: POST /v1/decisions takes one device for all its problems" in e["msg"]
    assert client.post("/v1/decisions", json={"device": "cpu", "problems": [q()]}).status_code == 200

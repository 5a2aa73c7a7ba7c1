import httpx

from tests.conftest import small


def q(**kw):
    return {k: v for k, v in small(**kw).to_dict().items()}


def test_get_decision_from_the_real_server(server):
    r = httpx.get(f"{server}/v1/decision", params=q(batch_size=3, kv_len=200))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["source"] == "measured" and body["kernel"] == "torch-sdpa" and body["device"].startswith("CPU")


def test_post_decisions_in_order(server):
    probs = [q(batch_size=1, kv_len=64), q(batch_size=64, kv_len=64), q(head_dim=128)]
    r = httpx.post(f"{server}/v1/decisions", json={"problems": probs})
    assert r.status_code == 200
    assert [d["source"] for d in r.json()["decisions"]] == ["measured", "learned", "rule"]
    assert r.json()["count"] == 3


def test_invalid_problem_is_422_naming_the_field(server):
    r = httpx.get(f"{server}/v1/decision", params={**q(), "num_kv_heads": 3})
    assert r.status_code == 422
    (err,) = r.json()["detail"]
    assert err["loc"] == ["query", "num_qo_heads"] and "not divisible by num_kv_heads 3" in err["msg"]
    r = httpx.get(f"{server}/v1/decision", params={**q(), "batch_size": "lots"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "batch_size"]
    r = httpx.post(f"{server}/v1/decisions", json={"problems": [q(), {**q(), "kv_dtype": "fp4"}]})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "problems", 1, "kv_dtype"]


def test_unknown_device_is_404_listing_known_ones(server):
    r = httpx.get(f"{server}/v1/decision", params={**q(), "device": "NVIDIA B200"})
    assert r.status_code == 404 and "it holds: CPU" in r.json()["detail"]


def test_healthz_and_openapi(server):
    assert httpx.get(f"{server}/healthz").json()["status"] == "ok"
    assert "/v1/decision" in httpx.get(f"{server}/openapi.json").json()["paths"]

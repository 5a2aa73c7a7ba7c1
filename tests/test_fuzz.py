"""Hostile input: property-based fuzzing of the problem parser and of the REST API (real server)."""
import json

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dispatcher import AttentionProblem, ProblemError
from dispatcher.problem import FIELDS

anything = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                     st.text(max_size=12),
                     st.sampled_from(["decode", "prefill", "bf16", "fp8", "fp16", "1", "-1", "true"]))
plausible = {
    "phase": st.sampled_from(["decode", "prefill", "train", ""]),
    "num_qo_heads": st.integers(-2, 2000), "num_kv_heads": st.integers(-2, 2000),
    "head_dim": st.integers(-1, 2048), "page_size": st.integers(0, 8192), "batch_size": st.integers(-1, 1 << 17),
    "kv_len": st.integers(-1, 1 << 25), "q_len": st.integers(-1, 1 << 21),
    "q_dtype": st.sampled_from(["bf16", "fp8", "fp4", "float16"]), "kv_dtype": st.sampled_from(["bf16", "fp8", "int8"]),
    "out_dtype": st.sampled_from(["bf16", "fp8", "fp32"]), "causal": st.booleans(),
    "window_left": st.integers(-5, 10**6), "has_sinks": st.booleans(),
}
problem_dicts = st.one_of(
    st.fixed_dictionaries({}, optional={k: v for k, v in plausible.items()}),
    st.dictionaries(st.sampled_from([*FIELDS, "heads", "device"]), anything, max_size=16),
)


@settings(max_examples=1500, deadline=None)
@given(problem_dicts)
def test_parser_accepts_or_names_the_field(d):
    try:
        p = AttentionProblem.from_dict(d)
    except ProblemError as e:
        assert e.field in str(e) and (e.field in FIELDS or e.field in d)
        return
    assert p == AttentionProblem.from_dict(p.to_dict()) and hash(p) == hash(AttentionProblem(**p.to_dict()))


def check(r: httpx.Response) -> None:
    assert r.status_code < 500, (r.status_code, r.text[:300])
    if r.status_code >= 400:
        detail = r.json()["detail"]
        text = detail if isinstance(detail, str) else " ".join(f"{e['loc']} {e['msg']}" for e in detail)
        assert text.strip(), r.text


def test_rest_get_decision_never_5xx(server):
    sent = []
    with httpx.Client(base_url=server) as c:

        @settings(max_examples=700, deadline=None, suppress_health_check=list(HealthCheck))
        @given(params=problem_dicts)
        def one(params):
            check(c.get("/v1/decision", params={k: str(v) for k, v in params.items()}))
            sent.append(1)
        one()
    assert len(sent) >= 500


def test_rest_post_and_kernels_never_5xx(server):
    sent = []

    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
    @given(body=st.one_of(st.fixed_dictionaries({"problems": st.lists(problem_dicts, max_size=4)}),
                          st.dictionaries(st.text(max_size=8), anything, max_size=3), st.lists(anything, max_size=3),
                          anything),
           kernels=problem_dicts)
    def one(body, kernels):
        raw = json.dumps(body).encode()                    # NaN/Infinity stay in: invalid JSON must be a 4xx
        headers = {"content-type": "application/json"}
        check(c.post("/v1/decisions", content=raw, headers=headers))
        check(c.get("/v1/kernels", params={k: str(v) for k, v in kernels.items()}))
        check(c.post("/v1/sweeps", content=raw, headers=headers))   # no token configured: 403, never 5xx
        sent.append(3)
    with httpx.Client(base_url=server) as c:
        one()
    assert sum(sent) >= 600


# the same integer spelled many ways, and values far past any limit
def respelled(n: int) -> st.SearchStrategy[str]:
    return st.one_of(st.just(str(n)), st.integers(1, 40).map(lambda z: "0" * z + str(n)), st.just(f"+{n}"),
                     st.just(f" {n}"), st.just(f"{n}.0"), st.just(f"{n}e0"))


oversized = st.one_of(st.integers(2**31, 2**200).map(str), st.text(min_size=100, max_size=3000),
                      st.integers(-2**200, -2).map(str))


def test_non_canonical_and_oversized_values_get_the_canonical_answer_or_a_4xx(server):
    from tests.conftest import small
    base = {k: str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in small(batch_size=4, kv_len=256).to_dict().items()}
    sent = []
    with httpx.Client(base_url=server) as c:
        canonical = c.get("/v1/decision", params=base).json()

        @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
        @given(field=st.sampled_from(["batch_size", "kv_len", "num_qo_heads", "head_dim", "page_size"]),
               spelling=st.data(), big=oversized)
        def one(field, spelling, big):
            r = c.get("/v1/decision", params={**base, field: spelling.draw(respelled(int(base[field])))})
            check(r)
            if r.status_code == 200:                          # accepted: the same answer as the plain spelling
                assert r.json() == canonical
            r = c.get("/v1/decision", params={**base, field: big})
            check(r)
            assert r.status_code in (414, 422)
            sent.append(2)
        one()
    assert sum(sent) >= 400

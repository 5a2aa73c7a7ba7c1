import pytest


@pytest.fixture(scope="module")
def device():
    """The CUDA device; the GPU tests' cases are planned for SM90 (the lent H200)."""
    from dispatcher.device import describe
    d = describe("cuda")
    assert d.sm == 90, "these cases are planned for SM90 (the lent H200)"
    return d

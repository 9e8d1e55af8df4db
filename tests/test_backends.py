"""The back-end registry behind the kernel door: a registered back end gets the calls it
does not decline, in priority order; the one switch turns native back ends off; a probe
that says no (or raises) keeps a back end out of the routes, with its reason listed."""
import numpy as np
import pytest

from tinytorch import backends
from tinytorch.core import acceleration as acc

A = np.arange(12, dtype=np.float32).reshape(3, 4)
B = np.ones((4, 2), np.float32)


@pytest.fixture
def toy():
    """A back end that serves only 3 x 4 @ 4 x 2 float32 GEMMs (and records each call)."""
    calls = []

    def gemm(a, b, trans_a, trans_b, alpha, beta, out, any_size):
        if a.shape != (3, 4) or trans_a or trans_b:
            return NotImplemented
        calls.append(a.shape)
        backends.record_path("toy:gemm")
        return np.full((3, 2), 42.0, np.float32)

    backends.register("toy", probe=lambda: (True, "always"), ops={"gemm": gemm}, priority=500)
    yield calls
    backends.unregister("toy")


def test_registered_back_end_serves_what_it_takes(toy):
    assert acc.gemm(A, B)[0, 0] == 42.0 and acc.last_path() == "toy:gemm"
    assert toy == [(3, 4)]
    # what it declines falls through to the next back end, and the result is right
    got = acc.gemm(A.T.copy(), B, trans_a=True)
    assert np.array_equal(got, A @ B) and acc.last_path() != "toy:gemm"
    assert len(toy) == 1
    assert "toy" in backends.all_backends() and backends.all_backends()["toy"][0]


def test_the_switch_turns_native_back_ends_off(toy):
    with acc.use_native(False):
        got = acc.gemm(A, B)
        assert acc.last_path() == "numpy" and np.array_equal(got, A @ B)
        assert backends.all_backends()["toy"][0] is False
    assert acc.gemm(A, B)[0, 0] == 42.0


def test_unusable_back_ends_get_no_calls():
    def boom():
        raise OSError("driver exploded")

    served = []
    backends.register("down", probe=lambda: (False, "no device here"),
                      ops={"gemm": lambda *a: served.append(1)}, priority=900)
    backends.register("broken", probe=boom, ops={"gemm": lambda *a: served.append(2)}, priority=901)
    try:
        assert np.array_equal(acc.gemm(A, B), A @ B) and served == []
        listing = backends.all_backends()
        assert listing["down"][0] is False and "no device here" in listing["down"][1]
        assert listing["broken"][0] is False and "driver exploded" in listing["broken"][1]
    finally:
        backends.unregister("down")
        backends.unregister("broken")


def test_names_are_unique_and_numpy_is_last():
    with pytest.raises(ValueError, match="already registered"):
        backends.register("numpy", probe=lambda: (True, ""))
    with pytest.raises(KeyError):
        backends.unregister("no-such-back-end")
    order = [b.name for b in backends.registered()]
    assert order[-1] == "numpy" and {"cpu:scalar", "cpu:avx2", "cpu:avx512", "cpu:neon"} <= set(order)
    assert backends.routes("gemm")[-1] is backends.reference.gemm


def test_the_active_isa_is_the_usable_cpu_entry():
    from tinytorch import native
    if not native.available():
        pytest.skip("needs the runtime")
    usable = [b.name for b in backends.registered()
              if b.name.startswith("cpu:") and backends.status(b.name)[0]]
    assert usable == ["cpu:" + native.isa()]
    before = native.isa()
    try:
        native.set_isa("scalar")
        usable = [b.name for b in backends.registered()
                  if b.name.startswith("cpu:") and backends.status(b.name)[0]]
        assert usable == ["cpu:scalar"]
        acc.gemm(np.ones((64, 64), np.float32), np.ones((64, 64), np.float32))
        assert acc.last_path() == "native:sgemm:scalar"
    finally:
        native.set_isa(before)


def test_the_fusion_entry_reports_compile_graphs_executors():
    """The registry's "fusion" entry serves one op, "fusion_run" (compile_graph's programs go
    through the door); its probe says whether the runtime's tile interpreter is there (and
    with which ISA) and whether a C compiler was found."""
    from tinytorch import _native, native
    usable, detail = backends.status("fusion")
    entry = {b.name: b for b in backends.registered()}["fusion"]
    from tinytorch.backends import fusion
    assert entry.ops == {"fusion_run": fusion.run}
    if native.available() and _native.has_fusion():
        assert usable and f"fusion:interp:{native.isa()}" in detail
    else:
        assert not usable and "NumPy" in detail

"""Shared fixtures of the native-runtime tests: the suite runs against a built package, so
a missing library (or a disabled native path) is a failure here, never a skip; `isa` runs a
test once under every ISA this build and CPU run (switched with tinytorch.native.set_isa,
restored afterwards); `threads` (1 and 2 kernel threads) is tests/conftest.py's."""
import pytest

from tinytorch import native
from tinytorch.core import acceleration as acc


@pytest.fixture(scope="module", autouse=True)
def runtime():
    assert native.available(), native.reason()
    assert acc.native_enabled(), "TINYTORCH_DISABLE_NATIVE is set: these tests need the native path"


# The ISAs a kernel test runs under here: compiled into the library and supported by the CPU.
USABLE_ISAS = [i for i in ("scalar", "avx2", "avx512", "neon")
               if i in native.info()["isas_compiled"] and i in native.info()["isa_detected"]]


@pytest.fixture(params=USABLE_ISAS)
def isa(request):
    before = native.isa()
    native.set_isa(request.param)
    yield request.param
    native.set_isa(before)

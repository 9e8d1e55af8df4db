"""The ctypes layer: library discovery, status -> exception mapping with the
library's message, ISA override, threads, memory counters, descriptors, and the
graceful fallback when the library cannot be loaded (checked in subprocesses).
"""
import ctypes
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tinytorch
from tinytorch import _native, native

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def lib():
    # The suite runs against a built package: a missing library is a failure, not a skip.
    assert native.available(), native.reason()
    return _native.lib


def run_python(code: str, **env_changes) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    for key, value in env_changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)


def test_info_describes_the_loaded_runtime(lib):
    info = native.info()
    assert info["available"] and info["reason"] == ""
    assert info["version"] == lib.tt_version().decode() == tinytorch.__version__
    assert os.path.exists(info["library"])
    assert info["isa_active"] in info["isa_detected"]
    assert info["isa_active"] in info["isas_compiled"]
    assert "scalar" in info["isas_compiled"]
    assert info["threads"] >= 1


def test_status_errors_carry_the_library_message(lib):
    a = np.ones((3, 4), np.float32)
    b = np.ones((4, 5), np.float32)
    c = np.zeros((3, 5), np.float32)
    f = _native.f32_ptr
    with pytest.raises(ValueError, match=r"lda=2.*must be >= 4") as err:
        _native.check(lib.tt_sgemm(0, 0, 3, 5, 4, 1.0, f(a), 2, f(b), 5, 0.0, f(c), 5), "sgemm")
    assert "TT_ERR" in str(err.value)
    with pytest.raises(ValueError, match="NULL"):
        _native.check(lib.tt_sgemm(0, 0, 3, 5, 4, 1.0, None, 4, f(b), 5, 0.0, f(c), 5))
    with pytest.raises(ValueError, match="-3"):
        _native.check(lib.tt_sgemm(0, 0, -3, 5, 4, 1.0, f(a), 4, f(b), 5, 0.0, f(c), 5))
    with pytest.raises(ValueError, match=r"shape\[1\]=-2"):
        handle = ctypes.c_void_p()
        shape = (ctypes.c_int64 * 2)(3, -2)
        _native.check(lib.tt_tensor_create(0, 2, shape, ctypes.byref(handle)))
    with pytest.raises(ValueError, match="overflow"):
        handle = ctypes.c_void_p()
        shape = (ctypes.c_int64 * 3)(2**40, 2**40, 2**40)
        _native.check(lib.tt_tensor_create(0, 3, shape, ctypes.byref(handle)))
    # nothing above touched c
    assert not c.any()


def test_f32_ptr_rejects_other_dtypes():
    with pytest.raises(TypeError, match="float64"):
        _native.f32_ptr(np.zeros(3))


def test_descriptors_and_use_after_free(lib):
    handle = ctypes.c_void_p()
    shape = (ctypes.c_int64 * 2)(4, 6)
    _native.check(lib.tt_tensor_create(0, 2, shape, ctypes.byref(handle)))
    view = ctypes.c_void_p()
    _native.check(lib.tt_tensor_transpose(handle, 0, 1, ctypes.byref(view)))
    got = (ctypes.c_int64 * 8)()
    _native.check(lib.tt_tensor_strides(view, got))
    assert list(got[:2]) == [1, 6]
    contiguous = ctypes.c_int()
    _native.check(lib.tt_tensor_is_contiguous(view, ctypes.byref(contiguous)))
    assert contiguous.value == 0
    _native.check(lib.tt_tensor_free(view))
    _native.check(lib.tt_tensor_free(handle))
    with pytest.raises(ValueError, match="not a live handle"):
        _native.check(lib.tt_tensor_free(handle))


def test_memory_counters_track_storage(lib):
    before = native.memory_stats()
    storage = ctypes.c_void_p()
    _native.check(lib.tt_storage_create(1 << 20, ctypes.byref(storage)))
    during = native.memory_stats()
    assert during["bytes_in_use"] == before["bytes_in_use"] + (1 << 20)
    assert during["allocations"] == before["allocations"] + 1
    assert during["peak_bytes"] >= during["bytes_in_use"]
    data = ctypes.c_void_p()
    _native.check(lib.tt_storage_data(storage, ctypes.byref(data)))
    assert data.value % 64 == 0
    _native.check(lib.tt_storage_release(storage))
    after = native.memory_stats()
    assert after["bytes_in_use"] == before["bytes_in_use"]
    assert after["frees"] == before["frees"] + 1
    native.reset_peak_memory()
    assert native.memory_stats()["peak_bytes"] == after["bytes_in_use"]


def test_set_isa_refuses_what_the_cpu_lacks(lib):
    original = native.isa()
    info = native.info()
    try:
        for name in ("scalar", "avx2", "avx512", "neon"):
            usable = name in info["isa_detected"] and name in info["isas_compiled"]
            if usable:
                native.set_isa(name)
                assert native.isa() == name
            else:
                with pytest.raises(RuntimeError, match=name):
                    native.set_isa(name)
                assert native.isa() != name
        with pytest.raises(ValueError, match="sse9"):
            native.set_isa("sse9")
    finally:
        native.set_isa(original)


def test_threads_control(lib):
    before = tinytorch.get_num_threads()
    try:
        tinytorch.set_num_threads(1)
        assert tinytorch.get_num_threads() == 1 == lib.tt_get_num_threads()
        for bad in (0, -1, 257):
            with pytest.raises(ValueError, match="outside 1..256"):
                tinytorch.set_num_threads(bad)
        for bad in (1.5, "2", True):
            with pytest.raises(TypeError, match="must be an int"):
                tinytorch.set_num_threads(bad)
    finally:
        tinytorch.set_num_threads(before)


def test_omp_num_threads_sets_the_default():
    out = run_python("import tinytorch; print(tinytorch.get_num_threads())", OMP_NUM_THREADS="1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"


@pytest.mark.parametrize("isa", ["scalar", "avx2", "avx512", "neon", "bogus", 'av"x\\2'])
def test_isa_environment_override(isa, lib):
    info = native.info()
    usable = isa in info["isa_detected"] and isa in info["isas_compiled"]
    out = run_python("import json, tinytorch.native as n; print(json.dumps(n.info()))", TINYTORCH_ISA=isa)
    assert out.returncode == 0, out.stderr
    child = json.loads(out.stdout)
    if usable:
        assert child["isa_active"] == isa and child["isa_env_error"] == ""
    else:
        assert child["isa_active"] == info["isa_best"]
        # the value is echoed with anything but [A-Za-z0-9_-] replaced, so the JSON stays valid
        assert "".join(c if c.isalnum() or c in "_-" else "?" for c in isa) in child["isa_env_error"]
        assert ("refused" in child["isa_env_error"]) or ("not one of" in child["isa_env_error"])


FALLBACK_CHECK = """
import numpy as np, tinytorch
from tinytorch import native
from tinytorch.core import acceleration
assert not native.available()
a = np.arange(12, dtype=np.float32).reshape(3, 4); b = np.ones((4, 2), np.float32)
assert np.array_equal(acceleration.matmul(a, b), a @ b)
assert acceleration.last_path() == "numpy", acceleration.last_path()
print(native.info()["reason"])
"""


def test_missing_library_falls_back_to_numpy(tmp_path):
    missing = str(tmp_path / "nope" / "libtinytorch.so")
    out = run_python(FALLBACK_CHECK, TINYTORCH_LIB=missing)
    assert out.returncode == 0, out.stderr
    assert missing in out.stdout and "no such file" in out.stdout


def test_corrupt_library_falls_back_to_numpy(tmp_path):
    fake = tmp_path / "libtinytorch.so"
    fake.write_text("this is not a shared library\n")
    out = run_python(FALLBACK_CHECK, TINYTORCH_LIB=str(fake))
    assert out.returncode == 0, out.stderr
    assert "not a loadable library" in out.stdout


def test_library_without_the_kernels_is_refused(tmp_path):
    # A real shared library that is not libtinytorch (libm has none of our symbols).
    import ctypes.util
    libm = ctypes.util.find_library("m")
    if libm is None:
        pytest.skip("no libm found to stand in for a foreign library")
    path = libm if os.path.isabs(libm) else None
    if path is None:
        for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib",
                  "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu"):
            if os.path.exists(os.path.join(d, libm)):
                path = os.path.join(d, libm)
                break
    if path is None:
        pytest.skip(f"cannot locate {libm} on disk")
    out = run_python(FALLBACK_CHECK, TINYTORCH_LIB=path)
    assert out.returncode == 0, out.stderr
    assert "symbol tt_" in out.stdout


def test_cli_info_reports_isa_and_backends(lib):
    out = subprocess.run([sys.executable, "-m", "tinytorch", "info"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "ISA active" in text and native.isa() in text
    # every registered back end is listed, usable or with the reason it is not
    from tinytorch import backends
    names = [b.name for b in backends.registered()]
    assert {"numpy", "cpu:" + native.isa(), "triton", "cuda", "mps"} <= set(names)
    lines = text.splitlines()
    section = lines[lines.index("Accelerator back ends") + 1:]
    section = section[:section.index("")] if "" in section else section  # up to the next section
    listed = {line.split()[0]: line for line in section}
    assert set(listed) == set(names)
    assert " yes " in listed["cpu:" + native.isa()] and " yes " in listed["numpy"]
    for name, line in listed.items():
        if " no " in line:
            assert len(line.split(" no ", 1)[1].strip()) > 10, line


def test_cli_info_without_library(tmp_path):
    out = run_python("import sys; from tinytorch.__main__ import main; sys.exit(main(['info']))",
                     TINYTORCH_LIB=str(tmp_path / "missing.so"))
    assert out.returncode == 0, out.stderr
    assert "NOT LOADED" in out.stdout and "missing.so" in out.stdout


def _header_prototypes():
    """{name: (return type, [parameter types])} of every TT_API function in the header,
    with types as C spells them ("const float *", "int64_t", ...)."""
    import re
    header = open(os.path.join(ROOT, "include", "tinytorch", "tinytorch.h")).read()
    header = re.sub(r"/\*.*?\*/", " ", header, flags=re.S)
    found = {}
    for ret, name, params in re.findall(r"TT_API\s+([\w\s\*]+?)\s*\b(tt_\w+)\s*\(([^)]*)\)", header):
        types = []
        for param in params.split(","):
            param = " ".join(param.split())
            if param in ("", "void"):
                continue
            # drop the parameter name: the last identifier
            types.append(re.sub(r"\s*\b\w+$", "", param).strip() if not param.endswith("*") else param)
        found[name] = (" ".join(ret.split()), types)
    return found


def _ctype_for(c_type: str):
    """The one binding convention of _native: pointers are c_void_p, except strings."""
    c_type = c_type.replace("const ", "").strip()
    if c_type == "char *":
        return ctypes.c_char_p
    if c_type.endswith("*") or c_type.endswith("_fn"):  # tt_*_fn: a function-pointer typedef
        return ctypes.c_void_p
    return {"int": ctypes.c_int, "int64_t": ctypes.c_int64, "float": ctypes.c_float, "double": ctypes.c_double,
            "void": None, "tt_status": ctypes.c_int, "tt_isa": ctypes.c_int}[c_type]


def test_every_header_function_is_declared():
    # The header is the contract: each TT_API function is declared once in _native, with
    # exactly the header's parameter and return types (in the binding's convention).
    declared = _header_prototypes()
    assert len(declared) > 40
    missing = set(declared) - set(_native.PROTOTYPES) - set(_native.OPTIONAL_PROTOTYPES)
    assert not missing, f"declare these in python/tinytorch/_native.py: {sorted(missing)}"
    for name, (ret, params) in declared.items():
        restype, argtypes = _native.PROTOTYPES.get(name) or _native.OPTIONAL_PROTOTYPES[name]
        want = [_ctype_for(p) for p in params]
        assert list(argtypes) == want, f"{name}: binding {argtypes} but the header says {params}"
        assert restype == _ctype_for(ret), f"{name}: returns {ret}, bound as {restype}"
        fn = getattr(_native.lib, name)
        assert fn.argtypes is not None or argtypes == [], name


def test_only_the_binding_declares_prototypes():
    # One binding: no other file of the package sets argtypes or builds CFUNCTYPEs.
    package = os.path.join(ROOT, "python", "tinytorch")
    offenders = []
    for folder, _, files in os.walk(package):
        for f in files:
            path = os.path.join(folder, f)
            if f.endswith(".py") and f != "_native.py":
                text = open(path).read()
                if "argtypes" in text or "CFUNCTYPE" in text:
                    offenders.append(os.path.relpath(path, ROOT))
    assert not offenders, offenders

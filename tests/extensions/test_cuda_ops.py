"""cuda_ops: the CUDA SGEMM stages' library and its Python side, without a GPU.

  * the header (include/tinytorch/tinytorch_cuda.h) and the binding (_native.CUDA_PROTOTYPES)
    agree, function by function and type by type;
  * where nvcc is found, CMake configures and builds libtinytorch_cuda in a temporary folder
    (one GPU arch, sm_90, to keep it short); it exports exactly the header's functions, loads
    without a driver, checks its arguments without a device (status + message), answers
    empty products, and refuses the GEMM itself with the reason when no device exists;
  * cuda_matmul returns the CPU result with the reason when the library is missing or no
    device answers, on awkward shapes, for every stage, with Tensors and autograd.
"""
import ctypes
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from contract import check_tensor_in_tensor_out, run_with_grads
from tinytorch import _native, backends
from tinytorch.core.acceleration import use_native
from tinytorch.core.tensor import Tensor
from tinytorch.extensions import cuda_ops

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADER = os.path.join(ROOT, "include", "tinytorch", "tinytorch_cuda.h")


def _nvcc():
    found = shutil.which("nvcc")
    if found:
        return found
    for path in ("/usr/local/cuda/bin/nvcc",):
        if os.path.exists(path):
            return path
    return None


def _header_prototypes(path):
    """{name: (return type, [parameter types])} of every TT_CUDA_API function."""
    text = re.sub(r"/\*.*?\*/", " ", open(path).read(), flags=re.S)
    found = {}
    for ret, name, params in re.findall(r"TT_CUDA_API\s+([\w\s\*]+?)\s*\b(tt_\w+)\s*\(([^)]*)\)", text):
        types = []
        for p in params.split(","):
            p = " ".join(p.split())
            if p in ("", "void"):
                continue
            types.append(p if p.endswith("*") else re.sub(r"\s*\b\w+$", "", p).strip())
            if "*" in p:  # "const float *A" -> "const float *"
                types[-1] = p[:p.rindex("*") + 1]
        found[name] = (" ".join(ret.split()), types)
    return found


def _ctype(c_type):
    """_native's convention: strings the library returns are c_char_p, every other pointer
    (a writable char buffer included) c_void_p."""
    if " ".join(c_type.split()) == "const char *":
        return ctypes.c_char_p
    c_type = c_type.replace("const ", "").strip()
    if c_type.endswith("*"):
        return ctypes.c_void_p
    return {"int": ctypes.c_int, "int64_t": ctypes.c_int64, "tt_status": ctypes.c_int}[c_type]


def test_header_and_binding_agree():
    declared = _header_prototypes(HEADER)
    assert len(declared) == 9 and set(declared) == set(_native.CUDA_PROTOTYPES)
    for name, (ret, params) in declared.items():
        restype, argtypes = _native.CUDA_PROTOTYPES[name]
        assert list(argtypes) == [_ctype(p) for p in params], f"{name}: {argtypes} vs header {params}"
        assert restype == _ctype(ret), f"{name}: returns {ret}, bound as {restype}"


# ------------------------------------------------------------------ the build

@pytest.fixture(scope="module")
def built_cuda_library(tmp_path_factory):
    nvcc, cmake = _nvcc(), shutil.which("cmake")
    if nvcc is None or cmake is None:
        pytest.skip(f"needs nvcc and cmake (nvcc: {nvcc}, cmake: {cmake})")
    build = tmp_path_factory.mktemp("cuda_build")
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    configure = subprocess.run(
        [cmake, "-S", ROOT, "-B", str(build), *generator, "-DCMAKE_BUILD_TYPE=Release",
         "-DBUILD_TESTING=OFF", "-DTT_OPENMP=OFF", f"-DCMAKE_CUDA_COMPILER={nvcc}",
         "-DCMAKE_CUDA_ARCHITECTURES=90"], capture_output=True, text=True, timeout=120)
    assert configure.returncode == 0, configure.stdout[-3000:] + configure.stderr[-3000:]
    done = subprocess.run([cmake, "--build", str(build), "--target", "tinytorch_cuda", "-j2"],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    path = build / "libtinytorch_cuda.so"
    assert path.exists(), os.listdir(build)
    return str(path)


def test_the_library_exports_the_header_functions(built_cuda_library):
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm is not installed")
    out = subprocess.run([nm, "-D", "--defined-only", built_cuda_library], capture_output=True,
                         text=True, check=True).stdout
    exported = {line.split()[-1] for line in out.splitlines() if line.split()[-1].startswith("tt_")}
    assert exported == set(_header_prototypes(HEADER)), exported


def _run(code, **env):
    done = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **env),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_built_library_checks_arguments_and_reports_no_device(built_cuda_library):
    code = r'''
import ctypes, numpy as np
from tinytorch import _native
lib, path, why = _native.load_cuda()
assert lib is not None and why == "", why
print(path)
f = lambda a: a.ctypes.data
a, b, c = np.ones((3, 4), np.float32), np.ones((4, 5), np.float32), np.full((3, 5), 7, np.float32)
print(lib.tt_cuda_stage_count(), [lib.tt_cuda_stage_name(i).decode() for i in range(4)], lib.tt_cuda_stage_name(4))
for args in [(9, 3, 5, 4, f(a), f(b), f(c)), (0, -3, 5, 4, f(a), f(b), f(c)), (0, 3, 5, 4, None, f(b), f(c)),
             (0, 1 << 40, 1 << 40, 4, f(a), f(b), f(c))]:
    print(lib.tt_cuda_sgemm(*args, None), lib.tt_cuda_last_error().decode())
print(lib.tt_cuda_sgemm(0, 3, 5, 0, None, None, f(c), None), c.max(), c.min())   # K == 0: C = 0
print(lib.tt_cuda_sgemm(0, 0, 5, 4, None, None, None, None))                       # nothing to do
count = ctypes.c_int(-1)
print(lib.tt_cuda_device_count(ctypes.byref(count)), count.value, lib.tt_cuda_last_error().decode())
print(lib.tt_cuda_sgemm(3, 3, 5, 4, f(a), f(b), f(c), None), lib.tt_cuda_last_error().decode())
from tinytorch.extensions import cuda_ops
out = cuda_ops.cuda_matmul(a, b, stage="register")
print(float(np.abs(out - 4).max()), cuda_ops.has_cuda_support(), cuda_ops.cuda_last_run()["reason"])
'''
    lines = _run(code, TINYTORCH_CUDA_LIB=built_cuda_library).splitlines()
    assert lines[0] == built_cuda_library
    assert lines[1] == "4 ['naive', 'coalesced', 'tiled', 'register'] None"
    assert lines[2].startswith("2 ") and "stage=9" in lines[2]                     # INVALID_ARGUMENT
    assert lines[3].startswith("2 ") and "M=-3" in lines[3]
    assert lines[4].startswith("1 ") and "'A' is NULL" in lines[4]                 # NULL_POINTER
    assert lines[5].startswith("2 ") and "exceed" in lines[5]
    assert lines[6] == "0 0.0 0.0" and lines[7] == "0"
    if backends.status("cuda")[0] or cuda_ops.has_cuda_support():
        pytest.skip("a CUDA device is present: the no-device answers are not what runs here")
    assert lines[8].startswith("6 0 ") and "no usable CUDA device" in lines[8]       # UNSUPPORTED
    assert lines[9].startswith("6 ") and "no usable CUDA device" in lines[9]
    err, support, reason = lines[10].split(" ", 2)
    assert float(err) == 0.0 and support == "False"
    assert "libtinytorch_cuda is built" in reason and built_cuda_library in reason


def test_without_the_library_it_falls_back_and_says_why(tmp_path):
    missing = str(tmp_path / "libtinytorch_cuda.so")
    code = ("import numpy as np\nfrom tinytorch.extensions import cuda_ops\n"
            "a = np.arange(6, dtype=np.float32).reshape(2, 3); b = np.ones((3, 2), np.float32)\n"
            "print(cuda_ops.cuda_matmul(a, b).tolist()); print(cuda_ops.has_cuda_support())\n"
            "print(cuda_ops.cuda_last_run()['reason']); print(cuda_ops.compile_and_load_cuda())\n")
    values, support, reason, handle = _run(code, TINYTORCH_CUDA_LIB=missing).splitlines()
    assert values == "[[3.0, 3.0], [12.0, 12.0]]" and support == "False" and handle == "None"
    assert "libtinytorch_cuda is not built" in reason and missing in reason


# ------------------------------------------------------------------ the Python side

def _ref(a, b):
    return np.asarray(a, np.float64) @ np.asarray(b, np.float64)


SHAPES = [(0, 3, 4), (3, 0, 4), (3, 4, 0), (1, 1, 1), (7, 13, 5), (31, 17, 29), (2, 129, 3)]


def _skip_if_gpu():
    if cuda_ops.has_cuda_support():
        pytest.skip("a CUDA device is present: the fallback is not what runs here")


@pytest.mark.parametrize("stage", cuda_ops.STAGES)
@pytest.mark.parametrize("mnk", SHAPES, ids=str)
def test_fallback_matches_float64_for_every_stage(stage, mnk):
    _skip_if_gpu()
    m, k, n = mnk
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    out = cuda_ops.cuda_matmul(a, b, stage=stage)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == (m, n)
    np.testing.assert_allclose(out, _ref(a, b), rtol=1e-5, atol=1e-5)
    run = cuda_ops.cuda_last_run()
    assert run["path"] == "cpu" and run["reason"] == cuda_ops.cuda_build_info()["detail"]


def test_fallback_non_contiguous_tensors_and_autograd():
    _skip_if_gpu()
    rng = np.random.default_rng(3)
    a = rng.standard_normal((9, 5)).astype(np.float32)
    b = rng.standard_normal((7, 5)).astype(np.float32).T    # a transposed view
    np.testing.assert_allclose(cuda_ops.cuda_matmul(a, b), _ref(a, b), rtol=1e-5, atol=1e-5)
    check_tensor_in_tensor_out(lambda x, y: cuda_ops.cuda_matmul(x, y, "naive"), [a, b], _ref)
    out, (ga, gb), g = run_with_grads(lambda x, y: cuda_ops.cuda_matmul(x, y, "register"), [a, b])
    np.testing.assert_allclose(ga, g.astype(np.float64) @ b.T.astype(np.float64), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gb, a.T.astype(np.float64) @ g, rtol=1e-5, atol=1e-5)


def test_dtype_rules_and_bad_input():
    a64 = np.random.default_rng(4).standard_normal((4, 3))
    b64 = np.random.default_rng(5).standard_normal((3, 2))
    out = cuda_ops.cuda_matmul(a64, b64)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, a64 @ b64, rtol=1e-12)
    assert cuda_ops.cuda_matmul(np.ones((2, 3), np.int32), np.ones((3, 1), np.int32)).dtype == np.float32
    with pytest.raises(ValueError, match="stage must be one of"):
        cuda_ops.cuda_matmul(a64, b64, stage="warp")
    with pytest.raises(ValueError, match="Incompatible matrix dimensions"):
        cuda_ops.cuda_matmul(a64, a64)
    with pytest.raises(TypeError, match="real-valued"):
        cuda_ops.cuda_matmul(a64.astype(np.complex64), b64)
    with pytest.raises(TypeError, match="Tensor or a numpy.ndarray"):
        cuda_ops.cuda_matmul([[1.0]], b64)


def test_registry_entry_and_switch():
    entry = {b.name: b for b in backends.registered()}["cuda"]
    assert set(entry.ops) == {"cuda_matmul"}
    info = cuda_ops.cuda_build_info()
    assert info["stages"] == cuda_ops.STAGES and isinstance(info["detail"], str) and info["detail"]
    with use_native(False):
        assert cuda_ops.has_cuda_support() is False
        a = np.ones((2, 2), np.float32)
        np.testing.assert_array_equal(cuda_ops.cuda_matmul(a, a), 2 * a)
        if backends.status("cuda")[0]:
            assert "turned off" in cuda_ops.cuda_last_run()["reason"]
    assert isinstance(Tensor, type)

"""benchmarks/device_check.py without a GPU, and `tinytorch info` on the GPU back ends.

  * with no NVIDIA GPU it exits with status 2 and a clear message, measures nothing and
    does not write --out; TRITON_INTERPRET=1 is refused the same way;
  * its arithmetic (FLOPs, GELU bytes, the break-even N, the cubic projection) and its
    markdown are right on hand-made numbers;
  * with the GPU probe forced to answer yes on a machine that has none, the run reports
    every kernel as not run with the reason, writes the markdown and exits 0 (nothing
    failed, nothing was claimed);
  * `tinytorch info` lists triton, cuda and mps with an honest status and reason.
"""
import importlib.util
import os
import subprocess
import sys

import pytest

from tinytorch import backends

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "device_check.py")


def _load():
    spec = importlib.util.spec_from_file_location("device_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _has_gpu():
    from tinytorch.backends import devices
    return devices.nvidia_gpu()[0]


@pytest.mark.skipif(_has_gpu(), reason="an NVIDIA GPU is present: the check would really run")
def test_without_a_gpu_it_exits_2_and_writes_nothing(tmp_path):
    out = tmp_path / "device_check.md"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, SCRIPT, "--out", str(out)], capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no NVIDIA GPU on this machine" in done.stderr and "Nothing was measured" in done.stderr
    assert str(out) in done.stderr and not out.exists()
    assert done.stdout == ""


def test_the_interpreter_is_refused(tmp_path):
    done = subprocess.run([sys.executable, SCRIPT, "--out", str(tmp_path / "x.md")], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, TRITON_INTERPRET="1"))
    assert done.returncode == 2 and "TRITON_INTERPRET=1" in done.stderr
    assert not (tmp_path / "x.md").exists()


def test_help_names_the_options():
    done = subprocess.run([sys.executable, SCRIPT, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "--out" in done.stdout and "--quick" in done.stdout


def test_arithmetic_and_markdown():
    dc = _load()
    assert dc.gemm_flops(1024) == 2 * 1024 ** 3
    assert dc.gelu_bytes(10, "forward") == 80 and dc.gelu_bytes(10, "backward") == 120
    assert dc.gelu_bytes(10, "forward", itemsize=2) == 40
    assert dc.break_even([128, 256, 512], [0.1, 1.0, 8.0], [0.5, 1.5, 2.0]) == 512
    assert dc.break_even([128, 256], [0.1, 1.0], [0.5, 1.5]) is None
    assert dc.break_even([], [], []) is None
    assert dc.projected_seconds(1024, 0.5, 2048) == pytest.approx(4.0)
    table = dc.markdown_table(("a", "b"), [(1, "x"), (2.5, "")])
    assert table.splitlines() == ["| a | b |", "|---|---|", "| 1 | x |", "| 2.5 |  |"]


def test_a_forced_gpu_probe_reports_every_kernel_as_not_run(tmp_path, monkeypatch, capsys):
    from tinytorch.backends import devices
    from tinytorch.extensions import cuda_ops, triton_gelu
    if triton_gelu.has_triton_support() or cuda_ops.has_cuda_support():
        pytest.skip("GPU kernels can run here: this test is for a machine without them")
    dc = _load()
    for name in ("triton", "cuda", "mps"):   # probe (and cache) with the real answer first:
        backends.status(name)                # only the check's own GPU test sees the fake
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(devices, "nvidia_gpu", lambda: (True, "1 CUDA device(s) (forced by the test)"))
    out = tmp_path / "sub" / "check.md"
    assert dc.main(["--out", str(out), "--quick"]) == 0
    text = out.read_text()
    assert text.startswith("# Device check") and "## Not run" in text
    assert "Triton fused GELU not run: " + triton_gelu.triton_build_info()["detail"] in text
    assert "CUDA SGEMM stages not run: " + cuda_ops.cuda_build_info()["detail"] in text
    assert "CPU:" in text and "GPU:" in text
    assert text in capsys.readouterr().out


DRY_RUN = r'''
import importlib.util, sys, time
import numpy as np, torch
spec = importlib.util.spec_from_file_location("device_check", sys.argv[1])
dc = importlib.util.module_from_spec(spec); spec.loader.exec_module(dc)
from tinytorch.extensions import triton_gelu as tg

class HostTorch(dc.Device):
    """PyTorch CPU tensors as the 'device' (the interpreter's memory); wall-clock timing."""
    def __init__(self):
        self.name, self.lib = "torch", torch
    def to_device(self, a):
        return torch.from_numpy(np.ascontiguousarray(a))
    def to_host(self, d):
        return d.numpy()
    def empty(self, shape):
        return torch.empty(shape, dtype=torch.float32)
    def randn(self, shape):
        return torch.randn(shape, dtype=torch.float32)
    def median_ms(self, fn, repeats=5, warmup=1, inner=1):
        t0 = time.perf_counter(); fn(); return 1e3 * (time.perf_counter() - t0)

real_info = tg.triton_build_info
tg.triton_build_info = lambda: dict(real_info(), mode="gpu")   # take the GPU branch
dc.GELU_SIZES = ((37, 70),)
dc.COPY_ELEMENTS = (4096, 4096)
check = dc.Check()
dc.check_triton(HostTorch(), check, quick=True)
print("PARITY", len(check.parity), check.failed)
for row in check.rows:
    print("ROW", row[0], "|", row[1])
'''


def test_the_triton_part_runs_end_to_end_on_the_interpreter():
    # The GPU branch of check_triton, with PyTorch CPU tensors standing in for device arrays
    # under TRITON_INTERPRET=1: every line of it runs before a GPU is ever lent.
    pytest.importorskip("torch")
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed")
    done = subprocess.run([sys.executable, "-c", DRY_RUN, SCRIPT], capture_output=True, text=True,
                          timeout=240, env=dict(os.environ, TRITON_INTERPRET="1"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert "PARITY 18 False" in lines, done.stdout   # GELU: 4 shapes x fwd/bwd x host/device; attention: 2
    rows = [line for line in lines if line.startswith("ROW")]
    assert [r.split("|")[0].strip() for r in rows] == [
        "ROW device copy (d2d)", "ROW triton fused GELU forward", "ROW triton fused GELU backward",
        "ROW offload: GELU from host"], rows


CUDA_DRY_RUN = DRY_RUN.split("real_info =")[0] + r'''
import ctypes
from tinytorch import _native, backends
from tinytorch.backends import devices
from tinytorch.extensions import cuda_ops

def view(ptr, rows, cols):
    return np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)), (rows, cols))

class FakeCudaLib:
    """libtinytorch_cuda's ABI computed with NumPy on host pointers (C = A B, fixed times)."""
    calls = []
    def tt_cuda_sgemm(self, stage, M, N, K, A, B, C, times):
        self.calls.append(("host", stage, M, N, K))
        view(C, M, N)[...] = view(A, M, K) @ view(B, K, N)
        for i in range(3):
            times[i] = 0.25
        return 0
    def tt_cuda_sgemm_device(self, stage, M, N, K, A, B, C, kernel_ms):
        self.calls.append(("device", stage, M, N, K))
        view(C, M, N)[...] = view(A, M, K) @ view(B, K, N)
        kernel_ms._obj.value = 0.5
        return 0
    def tt_cuda_device_count(self, count):
        count._obj.value = 1
        return 0
    def tt_cuda_device_name(self, buf, capacity):
        ctypes.memmove(buf, b"Fake GPU (sm_90)\0", 17)
        return 0
    def tt_cuda_last_error(self):
        return b""

fake = FakeCudaLib()
_native.load_cuda = lambda refresh=False: (fake, "/fake/libtinytorch_cuda.so", "")
devices.nvidia_gpu = lambda: (True, "1 CUDA device(s) (fake)")
backends.refresh()
assert cuda_ops.has_cuda_support(), backends.status("cuda")
dc.GEMM_SIZES = (32, 64)
dc.OFFLOAD_SIZES = (8, 16, 32, 64)
check = dc.Check()
dc.check_cuda(HostTorch(), check, quick=True)
print("PARITY", len(check.parity), check.failed)
print("CALLS", len([c for c in fake.calls if c[0] == "host"]), len([c for c in fake.calls if c[0] == "device"]))
for row in check.rows:
    print("ROW", " | ".join(str(c) for c in row))
print("MACHINE", dc.machine_description())
'''


def test_the_cuda_part_runs_end_to_end_on_a_fake_library():
    # check_cuda against a stand-in for libtinytorch_cuda (NumPy behind the same ABI) and
    # PyTorch CPU tensors: the parity loop, the ladder table, the offload rows and the
    # break-even line all run here, so their first GPU run is not their first run.
    pytest.importorskip("torch")
    done = subprocess.run([sys.executable, "-c", CUDA_DRY_RUN, SCRIPT], capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "PARITY 20 False" in out, out          # 5 shapes x 4 stages, all within tolerance
    # parity: 20 host calls; offload: 4 sizes x 3; ladder: 2 sizes x 4 stages x 3 on device
    assert "CALLS 32 24" in out, out
    rows = [line[4:] for line in out.splitlines() if line.startswith("ROW ")]
    assert sum(r.startswith("cuBLAS FP32 (anchor)") for r in rows) == 2
    for stage in ("naive", "coalesced", "tiled", "register"):
        assert sum(r.startswith(f"sgemm {stage} |") for r in rows) == 2, rows
    assert sum(r.startswith("offload: sgemm register from host") for r in rows) == 4
    assert rows[-1].startswith("offload break-even N")
    assert "MACHINE GPU: Fake GPU (sm_90)." in out


def test_tinytorch_info_lists_the_gpu_back_ends_honestly():
    done = subprocess.run([sys.executable, "-m", "tinytorch", "info"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    for name, op in (("triton", "triton_bias_gelu"), ("cuda", "cuda_matmul"), ("mps", "mps_matmul")):
        ok, detail = backends.status(name)
        line = lines[name]
        assert line.split()[1] == ("yes" if ok else "no"), line
        assert op in line and detail.split(":")[0] in line, line

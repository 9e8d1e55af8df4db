"""The threading model from Python, without timing (runtime/core/thread_pool.h):

- the thread count's source: OMP_NUM_THREADS, the affinity mask and a cgroup CPU quota
  decide the default, ``tinytorch info`` says which;
- held workers (the runtime's test hook: as if they had lost their cores): calls complete on
  the caller with the same bits and the pool's counters show no worker ran a chunk;
- a slow worker (the other hook: descheduled after claiming a chunk): the join waits, the
  pool counts a stall and backs off, the calls during the back-off run on the caller alone
  (the GEMM's grid cut as one thread's), all with the same bits;
- a worker that can only run on the caller's core (a process pinned to one CPU): the pool
  counts the job as one-core and backs off;
- the same bits on 1, 2, 3 and 7 threads for the door's kernels and for compile_graph's
  interpreter with an accumulated output (a broadcast input's gradient), both executors;
- two Python threads calling kernels at once.
The C side (every kernel family, nesting, fork) is tests/c/test_threads.c.
"""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import tinytorch
from tinytorch import _native, native
from tinytorch.core import acceleration as acc
from tinytorch.core.tensor import Tensor
from tinytorch.extensions.compile import compile_graph


def child(code: str, env: dict | None = None) -> str:
    full = dict(os.environ)
    full.pop("OMP_NUM_THREADS", None)
    full.update(env or {})
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


REPORT = "import tinytorch, tinytorch.native as n; print(tinytorch.get_num_threads(), '|', n.info()['threads_source'])"


def test_omp_num_threads_rules_and_is_named():
    assert child(REPORT, {"OMP_NUM_THREADS": "3"}) == "3 | OMP_NUM_THREADS=3"


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no affinity masks on this OS")
def test_default_follows_the_affinity_mask():
    one_cpu = f"import os; os.sched_setaffinity(0, {{sorted(os.sched_getaffinity(0))[0]}}); {REPORT}"
    assert child(one_cpu) == "1 | CPU affinity mask: 1 CPU"
    n = len(os.sched_getaffinity(0))
    assert child(REPORT).startswith(f"{min(n, 256)} | CPU affinity mask: {n} CPU")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="cgroups are Linux's")
def test_a_cgroup_quota_lowers_the_default(tmp_path):
    (tmp_path / "cpu.max").write_text("50000 100000\n")
    out = child(REPORT, {"TINYTORCH_CGROUP_ROOT": str(tmp_path)})
    if len(os.sched_getaffinity(0)) > 1:
        assert out == "1 | cgroup CPU quota 0.50 CPUs (affinity allows %d)" % len(os.sched_getaffinity(0))
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert "CPU affinity mask" in child(REPORT, {"TINYTORCH_CGROUP_ROOT": str(tmp_path)})


def test_info_says_where_the_count_came_from():
    out = child("import sys; from tinytorch.__main__ import main; sys.argv = ['tinytorch', 'info']; main()",
                {"OMP_NUM_THREADS": "2"})
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("threads"))
    assert "OMP_NUM_THREADS=2" in line and "own pool" in line


def workloads(rng):
    """Door kernels and fused programs whose results must not depend on the threads."""
    a = rng.standard_normal((301, 257), dtype=np.float32)
    b = rng.standard_normal((257, 263), dtype=np.float32)
    x = rng.standard_normal((700, 129), dtype=np.float32)
    bias = rng.standard_normal(129, dtype=np.float32)
    q = rng.standard_normal((1, 2, 200, 32), dtype=np.float32)
    g = rng.standard_normal((1, 2, 200, 32), dtype=np.float32)

    def fused(executor):
        os.environ["TINYTORCH_FUSION"] = executor
        try:
            xt, bt = Tensor(x, requires_grad=True), Tensor(bias, requires_grad=True)
            fn = compile_graph(lambda x, b: (x * b).tanh() + x, x, bias)
            (fn(xt, bt) * Tensor(x)).sum().backward()  # grad b: an accumulated output
            return [fn(x, bias), xt.grad, bt.grad]
        finally:
            del os.environ["TINYTORCH_FUSION"]

    out, lse = acc.attention(q, q, q, causal=True)
    grads = acc.attention_backward(q, q, q, out, lse, g, causal=True)
    return [acc.matmul(a, b), acc.bias_gelu(x, bias), out, *grads, *fused("interp"), *fused("compiled")]


def results(n_threads):
    tinytorch.set_num_threads(n_threads)
    return workloads(np.random.default_rng(7))


@pytest.fixture
def restore_threads():
    before = tinytorch.get_num_threads()
    yield
    _native.lib.tt_thread_pool_hold(0)
    _native.lib.tt_thread_pool_slow(0)
    tinytorch.set_num_threads(before)


def as_array(r):
    return r.data if isinstance(r, Tensor) else np.asarray(r)


def test_same_bits_on_every_thread_count(restore_threads):
    ref = results(1)
    for n in (2, 3, 7):
        for got, want in zip(results(n), ref):
            assert np.array_equal(as_array(got), as_array(want)), n


def test_held_workers_leave_the_work_to_the_caller(restore_threads):
    ref = results(4)
    _native.check(_native.lib.tt_thread_pool_hold(3))
    native.reset_thread_stats()
    held = results(4)
    stats = native.thread_stats()
    _native.check(_native.lib.tt_thread_pool_hold(0))
    for got, want in zip(held, ref):
        assert np.array_equal(as_array(got), as_array(want))
    assert stats["jobs"] > 0 and stats["chunks_workers"] == 0 and stats["chunks_caller"] > stats["jobs"]
    native.reset_thread_stats()
    results(4)  # released: the workers take part again
    assert native.thread_stats()["chunks_workers"] > 0 or native.thread_stats()["stalls"] > 0


@pytest.mark.skipif(os.environ.get("TINYTORCH_THREAD_BACKOFF") == "0", reason="the back-off is switched off")
def test_a_slow_worker_backs_the_pool_off(restore_threads):
    tinytorch.set_num_threads(2)
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((256, 300), dtype=np.float32), rng.standard_normal((300, 256), dtype=np.float32)
    x, bias = rng.standard_normal((700, 129), dtype=np.float32), rng.standard_normal(129, dtype=np.float32)
    want = acc.matmul(a, b), acc.bias_gelu(x, bias)
    _native.check(_native.lib.tt_thread_pool_slow(20000))  # 20 ms per claimed chunk
    native.reset_thread_stats()
    try:
        for _ in range(50):  # until the worker claims a chunk (it may sleep through a call)
            got = acc.matmul(a, b), acc.bias_gelu(x, bias)
            assert all(np.array_equal(g, w) for g, w in zip(got, want))
            if native.thread_stats()["stalls"]:
                break
        stalls = native.thread_stats()["stalls"]
        backed = []
        for _ in range(3):  # inside the back-off (at least 1 ms): on the caller, same bits
            got = acc.matmul(a, b), acc.bias_gelu(x, bias)
            assert all(np.array_equal(g, w) for g, w in zip(got, want))
            backed.append(native.thread_stats()["backed_off_jobs"])
    finally:
        _native.check(_native.lib.tt_thread_pool_slow(0))
    assert stalls >= 1, "a worker 20 ms late on its chunk was never waited for"
    assert backed[0] >= 1 and backed[-1] > backed[0], backed
    with pytest.raises(ValueError, match="delay_us=-1"):
        _native.check(_native.lib.tt_thread_pool_slow(-1))


ONE_CORE = """
import os
os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # the pool's worker inherits it
import numpy as np, tinytorch
from tinytorch import native
from tinytorch.core import acceleration as acc
rng = np.random.default_rng(3)
x, b = rng.standard_normal((2048, 1024), dtype=np.float32), rng.standard_normal(1024, dtype=np.float32)
tinytorch.set_num_threads(1)
want = acc.bias_gelu(x, b)
tinytorch.set_num_threads(2)
native.reset_thread_stats()
for i in range(200):
    assert np.array_equal(acc.bias_gelu(x, b), want)
    s = native.thread_stats()
    if s["one_core_jobs"] and s["backed_off_jobs"]:
        break
print(s["jobs"], s["chunks_workers"], s["one_core_jobs"], s["backed_off_jobs"])
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no affinity masks on this OS")
@pytest.mark.skipif(os.environ.get("TINYTORCH_THREAD_BACKOFF") == "0", reason="the back-off is switched off")
def test_a_worker_on_the_callers_core_backs_the_pool_off():
    """Two threads in a process pinned to one CPU: whenever the worker runs chunks, it runs
    them on the caller's core, which gains nothing (the scheduler does this on a busy
    machine). The pool counts such a job and runs the next calls on the caller alone."""
    jobs, worker_chunks, one_core, backed = map(int, child(ONE_CORE).split())
    assert worker_chunks > 0, "the worker never ran a chunk on the shared core"
    assert one_core >= 1, "jobs run only on the caller's core went unnoticed"
    assert backed >= 1, "no call ran alone after a one-core job"


def test_a_short_gemm_does_not_wake_sleeping_workers(restore_threads):
    """A GEMM whose one-thread estimate cannot pay for waking a sleeping worker (128^3: ~50 us)
    runs on its caller; a long one (256 x 512 x 256: ~800 us) wakes them. Both give the
    1-thread bits. The workers fall asleep 20 us after a job: the sleeps below outlast that."""
    import time
    rng = np.random.default_rng(5)
    small = rng.standard_normal((128, 128), dtype=np.float32), rng.standard_normal((128, 128), dtype=np.float32)
    big = rng.standard_normal((256, 512), dtype=np.float32), rng.standard_normal((512, 256), dtype=np.float32)
    tinytorch.set_num_threads(1)
    want = [acc.matmul(*small), acc.matmul(*big)]
    tinytorch.set_num_threads(2)
    acc.matmul(*big)  # the pool's worker exists
    jobs = []
    for (a, b), w in zip((small, big), want):
        time.sleep(0.05)
        native.reset_thread_stats()
        got = acc.matmul(a, b)
        jobs.append(native.thread_stats()["jobs"])
        assert np.array_equal(got, w)
        assert acc.last_path().startswith("native")
    assert jobs[0] == 0, "a 2M multiply-add GEMM woke a sleeping worker"
    assert jobs[1] >= 1, "a 33M multiply-add GEMM ran without the pool"


def _family_calls(rng, rows):
    """name -> a call of each kernel family with the wake-up rule, `rows` rows of 700 (the
    attention: `rows` / 2 queries a head; the int8 GEMM: `rows` / 16 rows of 768 x 768)."""
    x = rng.standard_normal((rows, 700), dtype=np.float32)
    b, g = rng.standard_normal(700, dtype=np.float32), np.ones(700, np.float32)
    q = rng.standard_normal((1, 4, rows // 2, 64), dtype=np.float32)
    xq = rng.standard_normal((rows // 16, 768), dtype=np.float32)
    w = rng.integers(-127, 128, (768, 768)).astype(np.int8)
    uq, _, zp = acc.quantize_rows(xq, True)
    packs = {}
    return {"bias_gelu": lambda: acc.bias_gelu(x, b),
            "layer_norm": lambda: acc.layer_norm(x, g, b, 1e-5)[0],
            "softmax": lambda: acc.softmax(x),
            "relu": lambda: acc.relu(x),
            "attention": lambda: acc.attention(q, q, q)[0],
            "int8 gemm": lambda: acc.quantized_matmul(uq, zp, w, packs, True)}


@pytest.mark.parametrize("family", ["bias_gelu", "layer_norm", "softmax", "relu", "attention", "int8 gemm"])
def test_each_family_leaves_short_calls_to_the_caller(restore_threads, family):
    """The same rule for every kernel family (runtime/core/parallel.h's solo_cost): a call
    estimated under 150 us on one thread (128 rows: 0.02-0.1 ms) runs on its caller when the
    workers sleep; a long one (1024 rows: 8x that) wakes them; both give the 1-thread bits."""
    import time
    rng = np.random.default_rng(6)
    small, big = _family_calls(rng, 128)[family], _family_calls(rng, 1024)[family]
    tinytorch.set_num_threads(1)
    want = [small(), big()]
    tinytorch.set_num_threads(2)
    acc.matmul(np.ones((256, 512), np.float32), np.ones((512, 256), np.float32))  # workers exist
    jobs = []
    for fn, w in zip((small, big), want):
        time.sleep(0.05)
        native.reset_thread_stats()
        got = fn()
        jobs.append(native.thread_stats()["jobs"])
        assert np.array_equal(got, w)
        assert acc.last_path().startswith("native"), acc.last_path()
    assert jobs[0] == 0, f"a short {family} call woke a sleeping worker"
    assert jobs[1] >= 1, f"a long {family} call ran without the pool"


def test_two_python_threads_at_once(restore_threads):
    tinytorch.set_num_threads(2)
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((256, 300), dtype=np.float32), rng.standard_normal((300, 200), dtype=np.float32)
    want = acc.matmul(a, b)
    bad = []

    def worker():
        for _ in range(40):
            if not np.array_equal(acc.matmul(a, b), want):
                bad.append(1)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads) and not bad

"""Regressions of what fuzzing found, seen from Python: a batched matmul with more
matrices than threads (and not a multiple of them) deadlocked the runtime, and so did
causal multi-head attention. Each case runs in a fresh interpreter with a timeout, so a
deadlock that comes back fails this test instead of stalling the suite."""
import os
import subprocess
import sys
import textwrap

import pytest

CASES = {
    "batched_matmul": """
        a = np.random.default_rng(0).standard_normal((BATCH, 100, 100)).astype(np.float32)
        got = (Tensor(a) @ Tensor(a)).data
        want = np.matmul(a.astype(np.float64), a.astype(np.float64))
        assert np.abs(got - want).max() < 1e-3, np.abs(got - want).max()
        assert native.last_kernel_path().startswith("sgemm_strided_batched:"), native.last_kernel_path()
    """,
    "causal_attention": """
        from tinytorch.core.attention import MultiHeadAttention, attention
        x = Tensor(np.random.default_rng(1).standard_normal((1, 128, 192)).astype(np.float32))
        out = MultiHeadAttention(192, 3)(x, causal=True)
        assert out.shape == (1, 128, 192) and np.isfinite(out.data).all()
        # the textbook path runs its products through the strided-batched GEMM (3 heads)
        q = Tensor(np.random.default_rng(2).standard_normal((1, 3, 128, 64)).astype(np.float32))
        stock = attention(q, q, q, causal=True, flash=False)
        assert np.isfinite(stock.data).all()
    """,
}


def run_case(body, threads, batch):
    code = textwrap.dedent("""
        import numpy as np
        import tinytorch
        from tinytorch import native
        from tinytorch.core.tensor import Tensor
        tinytorch.set_num_threads(THREADS)
        BATCH = BATCH_VALUE
    """).replace("THREADS", str(threads)).replace("BATCH_VALUE", str(batch)) + textwrap.dedent(body)
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("threads,batch", [(2, 3), (2, 5), (3, 4), (3, 7)])
def test_batched_matmul_finishes(threads, batch):
    try:
        done = run_case(CASES["batched_matmul"], threads, batch)
    except subprocess.TimeoutExpired:
        pytest.fail(f"(batch={batch}, 100, 100) @ itself on {threads} threads did not finish in 60 s")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("threads", [2, 3])
def test_causal_attention_finishes(threads):
    try:
        done = run_case(CASES["causal_attention"], threads, 1)
    except subprocess.TimeoutExpired:
        pytest.fail(f"causal MultiHeadAttention(192, 3) on {threads} threads did not finish in 60 s")
    assert done.returncode == 0, done.stderr


def test_absurd_thread_counts_are_refused():
    import tinytorch
    before = tinytorch.get_num_threads()
    for n in (50_000, 100_000):
        with pytest.raises(ValueError, match="outside 1..256"):
            tinytorch.set_num_threads(n)
    assert tinytorch.get_num_threads() == before

"""compile_graph's program checks, the report's DRAM accounting, and the native machinery:
invalid programs refused in Python (ValueError) and in C (a status with tt_last_error), the
generated C compiling with -Wall -Werror, the compiled-C cache (miss, hit, a tampered file
rejected and rebuilt, permissions), and two processes compiling one program at once."""
import os
import stat
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinytorch import _native
from tinytorch.core.acceleration import last_path
from tinytorch.backends.fusion import executors
from tinytorch.core.tensor import Tensor
from tinytorch.extensions import compile_graph
from tinytorch.extensions.fusion.ir import MAGIC, Node, Program

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
needs_fusion = pytest.mark.skipif(not _native.has_fusion(), reason="the runtime library has no tt_fusion_*")
needs_cc = pytest.mark.skipif(executors.compiler()[0] is None, reason="no C compiler")


def guide_program():
    """(x + bias) * scale on a 4 x 8 float32 domain (the header's example)."""
    return Program((4, 8), [0, 0, 0], [Node("INPUT", 0, 0), Node("INPUT", 0, 1), Node("INPUT", 0, 2),
                                       Node("ADD", 0, 0, 1), Node("MUL", 0, 3, 2)], [(4, 0)])


def broken_programs():
    """(what is wrong, words, imm) for every rule of the validator."""
    good = guide_program()
    w, imm = good.words(), good.imm()
    out = {}

    def edit(name, index, value):
        bad = w.copy()
        bad[index] = value
        out[name] = (bad, imm)

    edit("magic", 0, 0x1234)
    edit("version", 1, 2)
    edit("rank", 2, 0)
    edit("negative shape", 3, -4)
    edit("input dtype", 6, 7)
    n0 = 3 + 2 + 1 + 3 + 1          # first node word
    edit("unknown op", n0 + 3 * 5, 99)
    edit("operand out of range", n0 + 3 * 5 + 3, 7)          # ADD b = 7
    edit("cycle (operand not earlier)", n0 + 3 * 5 + 2, 3)   # ADD a = itself
    edit("unused operand not -1", n0 + 3 * 5 + 4, 0)
    edit("node dtype", n0 + 4 * 5 + 1, 5)
    edit("input slot", n0 + 2, 9)
    edit("output node", len(w) - 2, 40)
    edit("output flags", len(w) - 1, 4)
    out["n_words"] = (w[:-1], imm)
    out["n_imm"] = (w, imm[:-1])
    mismatch = Program((4, 8), [0, 1], [Node("INPUT", 0, 0), Node("INPUT", 1, 1), Node("ADD", 0, 0, 1)], [(2, 0)])
    out["dtype mismatch"] = (mismatch.words(), mismatch.imm())
    reduce_row = Program((4, 8), [0], [Node("INPUT", 0, 0), Node("SUM", 0, 0), Node("SUM", 0, 1)], [(2, 0)])
    out["reduction of a row value"] = (reduce_row.words(), reduce_row.imm())
    acc_row = Program((4, 8), [0], [Node("INPUT", 0, 0), Node("SUM", 0, 0)], [(1, 1)])
    out["accumulated row value"] = (acc_row.words(), acc_row.imm())
    huge = Program((2 ** 31, 2 ** 31, 4), [0], [Node("INPUT", 0, 0)], [(0, 0)])
    out["overflow"] = (huge.words(), huge.imm())
    return out


def _program_from_words(words, imm):
    """Rebuild a Program from words (for the Python validator), or None when it cannot be parsed."""
    w = [int(v) for v in words]
    try:
        if w[0] != MAGIC or w[1] != 1:
            return None
        r = w[2]
        shape, pos = tuple(w[3:3 + r]), 3 + r
        n_in = w[pos]
        dtypes, pos = w[pos + 1:pos + 1 + n_in], pos + 1 + n_in
        n = w[pos]
        pos += 1
        from tinytorch.extensions.fusion.ir import OP_CODES
        nodes = []
        for i in range(n):
            op, dt, a, b, c = w[pos + 5 * i:pos + 5 * i + 5]
            nodes.append(Node(OP_CODES.get(op, f"op{op}"), dt, a, b, c, float(imm[i]) if i < len(imm) else 0.0))
        pos += 5 * n
        n_out = w[pos]
        outs = [(w[pos + 1 + 2 * j], w[pos + 2 + 2 * j]) for j in range(n_out)]
        if pos + 1 + 2 * n_out != len(w) or len(imm) != n:
            return None
        return Program(shape, dtypes, nodes, outs)
    except (IndexError, ValueError):
        return None


@pytest.mark.parametrize("name", sorted(broken_programs()))
def test_invalid_programs_are_value_errors_in_python(name):
    words, imm = broken_programs()[name]
    prog = _program_from_words(words, imm)
    if prog is None:
        return  # malformed framing: only the C reader sees these words (next test)
    with pytest.raises(ValueError, match="fusion program"):
        prog.validate()


@needs_fusion
@pytest.mark.parametrize("name", sorted(broken_programs()))
def test_invalid_programs_are_refused_by_the_runtime(name):
    words, imm = broken_programs()[name]
    with pytest.raises(ValueError) as err:
        executors.NativeProgram(_native.lib, words, imm)
    assert "TT_ERR_" in str(err.value) and len(str(err.value)) > 40


@needs_fusion
def test_the_guide_program_runs_in_the_runtime():
    prog = executors.NativeProgram(_native.lib, guide_program().words(), guide_program().imm())
    assert "tt_fused_kernel" in prog.source()


def test_dram_accounting_matches_the_guide_table():
    n = 10 ** 7
    x = np.empty(n, np.float32)
    full = compile_graph(lambda x, b, s: (x + b) * s, x, x, x).dram_bytes()
    scalar_scale = compile_graph(lambda x, b, s: (x + b) * s, x, x, 0.5).dram_bytes()
    both_broadcast = compile_graph(lambda x, b, s: (x + b) * s, x, np.empty(1, np.float32),
                                   np.array(0.5, np.float32)).dram_bytes()
    # the guide: eager reads x, bias, t (120 MB) and writes t, y (80 MB); fused 80 + 40 MB
    assert (scalar_scale["eager_read"], scalar_scale["eager_write"]) == (120_000_000, 80_000_000)
    assert (scalar_scale["eager_total"], scalar_scale["fused_total"]) == (200_000_000, 120_000_000)
    assert (full["eager_total"], full["fused_total"]) == (240_000_000, 160_000_000)
    assert (both_broadcast["eager_total"], both_broadcast["fused_total"]) == (160_000_008, 80_000_008)


@pytest.mark.parametrize("mode", ["numpy", "interp", "compiled"])
def test_report_names_the_executor_and_times_both(monkeypatch, mode):
    if mode != "numpy" and not _native.has_fusion():
        pytest.skip("no tt_fusion_*")
    if mode == "compiled" and executors.compiler()[0] is None:
        pytest.skip("no C compiler")
    monkeypatch.setenv("TINYTORCH_FUSION", mode)
    x = np.random.default_rng(0).standard_normal((64, 33)).astype(np.float32)
    g = compile_graph(lambda x, b: (x + b).gelu() * 0.5, x, x[0])
    rep = g.report()
    assert rep.path == last_path() and rep.path.startswith(f"fusion:{mode}")
    assert rep.eager_bytes == 64 * 33 * 4 * 2 + 33 * 4 + 64 * 33 * 4 * 4
    assert rep.fused_bytes == 64 * 33 * 4 * 2 + 33 * 4
    assert rep.eager_seconds > 0 and rep.fused_seconds > 0
    text = str(rep)
    assert "eager" in text and "fused" in text and rep.path in text


# ------------------------------------------------------------------ the generated C

@needs_fusion
@needs_cc
def test_generated_exp_has_the_interpreters_bits_where_the_cpu_fuses_multiply_adds(monkeypatch):
    """The generated C's exp is the runtime's formula with its multiply-adds fused where the
    CPU has FMA (fmaf; ISO C never contracts a * b + c itself), so on such a CPU the compiled
    kernel and the interpreter's vector exp agree bit for bit, NaN, inf and both clamps included."""
    x = np.concatenate([np.linspace(-110, 110, 20011, dtype=np.float32),
                        np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 88.7, -87.3], np.float32)])
    out = {}
    for mode in ("interp", "compiled"):
        monkeypatch.setenv("TINYTORCH_FUSION", mode)
        g = compile_graph(lambda a: a.exp(), x)
        out[mode] = g(x)
        out[mode + " path"] = last_path()
    assert out["compiled path"].startswith("fusion:compiled"), out["compiled path"]
    if not out["interp path"].endswith(("avx2", "avx512")) or "-march=native" not in executors.compiler()[2]:
        pytest.skip(f"no fused multiply-add on both sides here ({out['interp path']})")
    np.testing.assert_array_equal(out["compiled"].view(np.uint32), out["interp"].view(np.uint32))
    normal = (x > -87.0) & (x < 88.0)  # results in float32's normal range
    np.testing.assert_allclose(out["compiled"][normal], np.exp(x[normal].astype(np.float64)), rtol=3e-7, atol=0)


@needs_fusion
@needs_cc
def test_generated_c_compiles_with_wall_werror(tmp_path):
    x = np.ones((5, 7), np.float32)
    graphs = [compile_graph(lambda x, b: (x + b).gelu() * x.sigmoid() - x.erf(), x, x[0]),
              compile_graph(lambda x: x.softmax(), x),
              compile_graph(lambda x, g, b: (x - x.mean(-1, keepdims=True)) * g + b, x, x[0], x[0].astype(np.float32)),
              compile_graph(lambda x: (np.where(x > 0, x, x * 0.1) ** 3).astype(np.float64).max(-1), x)]
    cc = executors.compiler()[0]
    for k, g in enumerate(graphs):
        src = tmp_path / f"k{k}.c"
        src.write_text(g.source)
        # the file starts no threads of its own: the runtime's pool runs its rows
        assert "omp" not in g.source and "pthread" not in g.source
        assert ("int tt_fused_rows(" in g.source) == ("acc_out" not in g.source)
        done = subprocess.run([cc, "-std=c11", "-O3", "-Wall", "-Werror", "-fPIC", "-shared",
                               "-o", str(tmp_path / f"k{k}.so"), str(src)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


@needs_fusion
@needs_cc
def test_cache_miss_hit_and_tampered_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYTORCH_CACHE", str(tmp_path))
    prog = guide_program()
    native = executors.NativeProgram(_native.lib, prog.words(), prog.imm())
    key_bytes = prog.words().tobytes() + prog.imm().tobytes()
    stats = {"hits": 0, "misses": 0, "rebuilds": 0}
    monkeypatch.setattr(executors, "_loaded", {})
    _, how = executors.compile_source(native.source(), key_bytes, stats)
    assert how == "compiled"
    folder = tmp_path / "fusion"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    so = [p for p in folder.iterdir() if p.suffix == ".so"]
    assert len(so) == 1 and stat.S_IMODE(so[0].stat().st_mode) == 0o600
    assert stat.S_IMODE(so[0].with_suffix(".sha256").stat().st_mode) == 0o600
    _, how = executors.compile_source(native.source(), key_bytes, stats)
    assert how == "loaded"                                 # this process has it
    monkeypatch.setattr(executors, "_loaded", {})
    _, how = executors.compile_source(native.source(), key_bytes, stats)
    assert how == "cache-hit"
    data = bytearray(so[0].read_bytes())
    data[len(data) // 2] ^= 0xFF
    # a new file under the old name (rewriting the mapped file in place would corrupt the
    # copy this process has loaded; the check is about what a later process would load)
    (folder / "tampered").write_bytes(bytes(data))
    os.replace(folder / "tampered", so[0])
    monkeypatch.setattr(executors, "_loaded", {})
    _, how = executors.compile_source(native.source(), key_bytes, stats)
    assert how == "rebuilt"
    assert executors._sha256_file(str(so[0])) == so[0].with_suffix(".sha256").read_text().strip()
    assert stats == {"hits": 1, "misses": 1, "rebuilds": 1}
    other = Program((4, 9), prog.input_dtypes, prog.nodes, prog.outputs)   # another shape: another key
    native2 = executors.NativeProgram(_native.lib, other.words(), other.imm())
    _, how = executors.compile_source(native2.source(), other.words().tobytes() + other.imm().tobytes(), stats)
    assert how == "compiled" and len([p for p in folder.iterdir() if p.suffix == ".so"]) == 2


def test_cache_directory_is_private(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYTORCH_CACHE", str(tmp_path / "c"))
    os.makedirs(tmp_path / "c" / "fusion", mode=0o777)
    os.chmod(tmp_path / "c" / "fusion", 0o777)
    path = executors.cache_dir()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700


WORKER = textwrap.dedent('''
    import multiprocessing as mp, sys
    import numpy as np

    def work(seed):
        from tinytorch.extensions import compile_graph, last_path
        x = np.arange(4096, dtype=np.float32).reshape(64, 64) / 100
        g = compile_graph(lambda x, b: (x + b).tanh() * 3 - x.sigmoid(), x, x[0])
        y = g(x, x[0])
        want = np.tanh(x.astype(np.float64) + x[0]) * 3 - 1 / (1 + np.exp(-x.astype(np.float64)))
        return last_path(), float(np.abs(y - want).max())

    if __name__ == "__main__":
        ctx = mp.get_context("spawn")
        with ctx.Pool(2) as pool:
            results = pool.map(work, [0, 1])
        for path, err in results:
            print(path, err)
''')


@needs_fusion
@needs_cc
def test_two_processes_compile_the_same_graph_at_once(tmp_path):
    script = tmp_path / "race.py"
    script.write_text(WORKER)
    env = dict(os.environ, TINYTORCH_CACHE=str(tmp_path / "cache"), TINYTORCH_FUSION="compiled")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                          timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("\n")
    results = [ln.split() for ln in lines if ln.strip()]
    assert len(results) == 2
    for path, err in results:
        assert path == "fusion:compiled" and float(err) < 1e-5
    so = [p for p in (tmp_path / "cache" / "fusion").iterdir() if p.suffix == ".so"]
    assert len(so) == 1
    assert not [p for p in (tmp_path / "cache" / "fusion").iterdir() if p.name.endswith(".tmp")]


@needs_fusion
def test_no_compiler_falls_back_to_the_interpreter(monkeypatch):
    monkeypatch.setenv("TINYTORCH_FUSION", "compiled")
    monkeypatch.setattr(executors, "compiler", lambda: (None, "no working C compiler: test", ()))
    g = compile_graph(lambda x: x * 2 + 1, np.ones(5, np.float32))
    np.testing.assert_array_equal(g(np.ones(5, np.float32)), np.full(5, 3.0, np.float32))
    assert last_path().startswith("fusion:interp:")
    assert "no working C compiler" in str(g.report())


@needs_fusion
@needs_cc
def test_a_failing_compile_falls_back_to_the_interpreter(monkeypatch, tmp_path):
    monkeypatch.setenv("TINYTORCH_FUSION", "compiled")
    monkeypatch.setenv("TINYTORCH_CACHE", str(tmp_path))
    monkeypatch.setattr(executors, "_loaded", {})
    path, ident, flags = executors.compiler()
    monkeypatch.setattr(executors, "compiler", lambda: (path, ident, flags + ("-DNOT_C=1", "-x", "fortran")))
    g = compile_graph(lambda x: x * 5, np.ones(3, np.float32))
    np.testing.assert_array_equal(g(np.ones(3, np.float32)), np.full(3, 5.0, np.float32))
    assert last_path().startswith("fusion:interp:")
    assert "compiling the generated C failed" in str(g.report())


@needs_fusion
@needs_cc
def test_auto_follows_the_measured_rule(monkeypatch, tmp_path):
    # compiled: arithmetic, float32 math the generated C spells as vectorisable formulas, row
    # reductions; interp: C-library math per element (float32 log, any float64 tanh)
    monkeypatch.setenv("TINYTORCH_FUSION", "auto")
    monkeypatch.setenv("TINYTORCH_CACHE", str(tmp_path))
    x = np.linspace(-2, 2, 64, dtype=np.float32).reshape(8, 8)
    for fn in (lambda x, b: (x + b) * 0.5 - x * x, lambda x, b: (x + b).gelu(),
               lambda x, b: (x * b).tanh() + (x - b).exp() * (x + b).sigmoid() + (x * x + 1.0).sqrt()):
        g = compile_graph(fn, x, x[0])
        g(x, x[0])
        assert last_path() == "fusion:compiled", g.ir
        assert g.report().reason == ""
    log = compile_graph(lambda x, b: (x * x + 1.0).log() * b, x, x[0])
    log(x, x[0])
    assert last_path().startswith("fusion:interp:")
    assert "auto: the program uses log (float32)" in str(log.report())
    cube = compile_graph(lambda x, b: (x + b) ** 3, x, x[0])
    cube(x, x[0])
    assert last_path().startswith("fusion:interp:") and "powi (float32)" in str(cube.report())
    square = compile_graph(lambda x, b: (x + b) ** 2, x, x[0])
    square(x, x[0])
    assert last_path() == "fusion:compiled"
    x64 = x.astype(np.float64)
    tanh64 = compile_graph(lambda x, b: (x + b).tanh(), x64, x64[0])
    tanh64(x64, x64[0])
    assert last_path().startswith("fusion:interp:") and "tanh (float64)" in str(tanh64.report())
    for fn in (lambda x: (x - x.mean(-1, keepdims=True)) * (x.var(-1, keepdims=True) + 1e-5).rsqrt(),
               lambda x: x.softmax()):
        g = compile_graph(fn, x)
        g(x)
        assert last_path() == "fusion:compiled"  # row reductions fold in vector lanes
    monkeypatch.setenv("TINYTORCH_FUSION", "interp")
    g(x)
    assert last_path().startswith("fusion:interp:")


@needs_fusion
@needs_cc
def test_the_generated_gelu_chain_vectorises(tmp_path):
    # the reason auto compiles float32 tanh: with the flags compile_source uses, GCC
    # vectorises the unit-stride loop (without -fno-trapping-math GCC 12 keeps tanh's
    # select as a branch on AVX2 and the loop stays scalar, 7x slower than the interpreter)
    path, ident, flags = executors.compiler()
    if "gcc" not in ident.lower() and "cc (" not in ident:
        pytest.skip(f"the vectoriser report is GCC's ({ident})")
    x = np.ones((4, 1000), np.float32)
    g = compile_graph(lambda x, b: (lambda u: 0.5 * u * (1.0 + (0.79788456 * (u + 0.044715 * u * u * u)).tanh()))(x + b),
                      x, x[0])
    src = tmp_path / "k.c"
    src.write_text(g.source)
    done = subprocess.run([path, *[f for f in flags if f != "-shared"], "-c", "-fopt-info-vec-optimized",
                           "-o", str(tmp_path / "k.o"), str(src)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "loop vectorized" in done.stderr, done.stderr


@needs_fusion
@settings(max_examples=300, deadline=None)
@given(edits=st.lists(st.tuples(st.integers(0, 40), st.integers(-3, 60)), min_size=1, max_size=4),
       cut=st.integers(0, 3))
def test_mutated_programs_are_accepted_or_refused_never_crash(edits, cut):
    # the C validator against random edits of a valid program: a status, never a crash; what
    # it accepts, the Python validator accepts too (the two implement one contract)
    prog = guide_program()
    words, imm = prog.words().copy(), prog.imm()
    for index, value in edits:
        words[index % len(words)] = value
    words = words[:len(words) - cut]
    try:
        executors.NativeProgram(_native.lib, words, imm)
    except (ValueError, MemoryError):
        return
    parsed = _program_from_words(words, imm)
    assert parsed is not None, words.tolist()
    parsed.validate()


@needs_fusion
@needs_cc
@pytest.mark.parametrize("cols", [0, 1, 15, 16, 17, 31, 1023, 1024, 1025, 2053, 4099])
def test_compiled_row_reductions_in_lanes_match_float64(monkeypatch, tmp_path, cols, threads):
    # the compiled unit-stride reduction pass folds 16 lanes per 1024-column tile, the tail
    # straight into the row's double: every split of a row (empty, under one lane block,
    # exact blocks, tile edges, primes) against a float64 reference; a strided view runs
    # the general loop; a NaN anywhere in a row (lane or tail) makes its max NaN
    monkeypatch.setenv("TINYTORCH_FUSION", "compiled")
    monkeypatch.setenv("TINYTORCH_CACHE", str(tmp_path))
    rng = np.random.default_rng(cols)
    big = (rng.standard_normal((7, cols + 5)) * 4).astype(np.float32)
    views = {"contiguous": np.ascontiguousarray(big[:, 2:2 + cols]), "row-strided": big[:, 2:2 + cols],
             "column-strided": np.ascontiguousarray(big.T).T[:, 1:1 + cols]}
    fns = {"sum": (lambda v: v.sum(axis=-1), np.sum), "mean": (lambda v: v.mean(axis=-1), np.mean),
           "max": (lambda v: v.max(axis=-1), np.max),
           "sum of squares": (lambda v: (v * v).sum(axis=-1), lambda a, axis: np.sum(a * a, axis=axis))}
    for view_name, x in views.items():
        if cols:
            x = x.copy() if view_name == "contiguous" else x
            x[1, cols // 2] = np.nan           # inside the lanes (or the tail of a short row)
            x[2, cols - 1] = np.nan            # the last column: the tail when cols % 16
            x[3, 0] = np.inf
            x[4, :] = -np.inf
        for name, (fn, ref) in fns.items():
            if name == "max" and cols == 0:
                continue  # NumPy refuses an empty max
            g = compile_graph(fn, x)
            got = g(x)
            assert last_path() == "fusion:compiled"
            with np.errstate(all="ignore"):
                want = ref(x.astype(np.float64), axis=-1)
            np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6 * max(cols, 1), equal_nan=True,
                                       err_msg=f"{name} {view_name} cols={cols}")
            if cols:
                assert np.isnan(got[1]) and np.isnan(got[2]), (name, view_name)
    if cols > 1:  # (a one-column reduction traces to no reduction at all)
        assert "lane" in compile_graph(lambda v: v.max(axis=-1), views["contiguous"]).source


@needs_fusion
@needs_cc
@pytest.mark.parametrize("cols", [0, 1, 2, 17, 1000, 1025, 2053])
def test_compiled_row_buffer_keeps_a_value_two_passes_read(monkeypatch, tmp_path, cols, threads):
    # softmax's exp(x - max) is needed by the sum pass and the output pass: the generated C
    # evaluates it once per row into keep<i>[cols] and reads it back (one exp in the file's
    # output loops, none recomputed); results against float64 for awkward rows, a strided
    # view, rows of -inf / +inf / NaN, forward and backward
    monkeypatch.setenv("TINYTORCH_FUSION", "compiled")
    monkeypatch.setenv("TINYTORCH_CACHE", str(tmp_path))
    rng = np.random.default_rng(cols + 7)
    big = (rng.standard_normal((6, cols + 3)) * 5).astype(np.float32)
    for x in (np.ascontiguousarray(big[:, 1:1 + cols]), big[:, 1:1 + cols]):
        if cols:
            x = x.copy()
            x[1, :] = -np.inf
            x[2, cols // 2] = np.inf
            x[3, cols - 1] = np.nan
        g = compile_graph(lambda v: (lambda e: e / e.sum(-1, keepdims=True))((v - v.max(-1, keepdims=True)).exp()), x)
        got = g(x)
        assert last_path() == "fusion:compiled"
        x64 = x.astype(np.float64)
        with np.errstate(all="ignore"):
            e = np.exp(x64 - x64.max(-1, keepdims=True)) if cols else x64
            want = e / e.sum(-1, keepdims=True)
        np.testing.assert_allclose(got, want, rtol=3e-6, atol=1e-7, equal_nan=True)
        if cols > 1:
            src = g.source
            writer = [line for line in src.splitlines() if "keep" in line and "] = v" in line]
            reader = [line for line in src.splitlines() if "= keep" in line]
            assert writer and reader, src
            output_pass = src[src.index("/* output pass */"):]
            assert "tt_expf" not in output_pass  # read back, not recomputed
        t = Tensor(x, requires_grad=True)
        seed = rng.standard_normal(x.shape).astype(np.float32)
        g(t).backward(seed)
        assert last_path() == "fusion:compiled"
        with np.errstate(all="ignore"):
            want_grad = want * (seed - (seed * want).sum(-1, keepdims=True))
        np.testing.assert_allclose(t.grad, want_grad, rtol=3e-5, atol=3e-6, equal_nan=True)

"""What a new user hits first, checked the way they would hit it.

  * The milestones use the installed tinytorch, say which runtime and ISA they loaded, name the
    kernel paths that ran, and warn loudly on stderr when the native library is missing.
  * milestones/README.md lists exactly the milestones that exist, each with its command.
  * The README's C quick start runs as written: its shell block, copied verbatim, configures,
    builds and installs the library, compiles the README's C program with pkg-config and runs it
    without LD_LIBRARY_PATH, and the program prints the documented output.
  * The MLPerf runner reports memory figures that are measured, not constants.
  * Markdown in the repository links only to files in the repository.
"""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tinytorch
from tinytorch import native

ROOT = Path(__file__).resolve().parents[1]
MILESTONES = ROOT / "milestones"
GPT_MILESTONE = MILESTONES / "05_2017_transformer" / "01_tinygpt_shakespeare.py"
README = ROOT / "README.md"


def _milestone_scripts():
    return sorted(p for p in MILESTONES.glob("*/*.py") if re.match(r"\d", p.name))


def _run_milestone(*args, env_extra=None, timeout=180):
    env = dict(os.environ)
    env.pop("TINYTORCH_DISABLE_NATIVE", None)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, str(GPT_MILESTONE), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=str(ROOT))


# ----------------------------------------------------------------------------------------------
# 1 + 5. The milestone: runtime banner, kernel paths, NumPy warning, KV-cache lines
# ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def smoke_run():
    # The command milestones/README.md gives for a smoke run.
    return _run_milestone("--steps", "3", "--sample", "80")


def test_milestone_smoke_run_names_runtime_and_native_paths(smoke_run):
    out = smoke_run.stdout
    assert smoke_run.returncode == 0, smoke_run.stderr
    assert f"tinytorch {tinytorch.__version__} from " in out
    assert "kernel paths: " in out
    if native.available():
        info = native.info()
        assert f"runtime   libtinytorch {info['version']}" in out
        assert info["library"] in out
        assert f"ISA       {info['isa_active']} active" in out
        paths = out.split("kernel paths: ", 1)[1].splitlines()[0]
        assert "native:" in paths, out
        assert "NOT loaded" not in smoke_run.stderr
    else:
        assert "NumPy" in smoke_run.stderr and "pip install" in smoke_run.stderr


def test_milestone_kv_cache_lines_say_where_the_cache_applies(smoke_run):
    out = smoke_run.stdout
    # 20-token prompt in a 64-token window: 44 tokens decode inside it; 80 go past it.
    positions = r"\n  positions run through the model: ([\d,]+) without the cache, ([\d,]+) with .*?same tokens: (\w+)"
    inside = re.search(r"KV cache within the 64-token window \(20-token prompt \+ 44 new tokens\):" + positions, out)
    assert inside, out
    plain, cached = (int(g.replace(",", "")) for g in inside.group(1, 2))
    # uncached: forwards over 20, 21, ..., 63 positions; cached: a 20-position prefill + 43 single steps
    assert (plain, cached) == (sum(range(20, 64)), 20 + 43)
    assert inside.group(3) == "True"
    past = re.search(r"KV cache past the window \(20 \+ 80 = 100 tokens > 64\):" + positions, out)
    assert past and past.group(3) == "True", out
    assert "absolute position embeddings" in out and "rebuilt from the last 64 tokens" in out


def test_milestone_warns_loudly_without_the_library():
    run = _run_milestone("--steps", "1", "--sample", "5", "--quiet",
                         env_extra={"TINYTORCH_LIB": str(ROOT / "no-such-dir" / "libtinytorch.so")})
    assert run.returncode == 0, run.stderr
    assert "runtime   none" in run.stdout
    assert "kernel paths: numpy (" in run.stdout and "native:" not in run.stdout
    assert "NOT loaded" in run.stderr and "falls back to NumPy" in run.stderr
    assert "pip install ." in run.stderr and "pip install -e ." in run.stderr


def test_runtime_helper_falls_back_to_the_checkout_only_when_not_installed():
    # Pretend tinytorch is not installed: the helper must then take the checkout's python/ folder.
    code = ("import importlib.util, sys\n"
            "real = importlib.util.find_spec\n"
            "importlib.util.find_spec = lambda name, *a: None if name == 'tinytorch' else real(name, *a)\n"
            f"sys.path.insert(0, {str(MILESTONES)!r})\n"
            "import _runtime\n"
            "t = _runtime.load()\n"
            "print('FILE', t.__file__)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=str(ROOT / "tests"))
    assert run.returncode == 0, run.stderr
    assert "checkout's python/ folder (tinytorch is not installed)" in run.stdout
    loaded = Path(run.stdout.split("FILE ", 1)[1].strip()).resolve()
    assert loaded == (ROOT / "python" / "tinytorch" / "__init__.py").resolve()


def test_every_milestone_uses_the_runtime_helper():
    scripts = _milestone_scripts()
    assert scripts
    for script in scripts:
        text = script.read_text(encoding="utf-8")
        assert "import _runtime" in text and "_runtime.load()" in text, script
        assert "track_kernel_paths" in text and "_runtime.report(" in text, script
        assert not re.search(r"sys\.path\.insert\([^)]*[\"']python[\"']", text), \
            f"{script} puts the checkout's python/ folder on sys.path itself"


# ----------------------------------------------------------------------------------------------
# 2. milestones/README.md lists what exists
# ----------------------------------------------------------------------------------------------

def test_milestones_readme_lists_exactly_what_exists():
    text = (MILESTONES / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"`python (milestones/[^` ]+\.py)", text))
    existing = {p.relative_to(ROOT).as_posix() for p in _milestone_scripts()}
    assert listed == existing
    for link in re.findall(r"\]\(([^)#]+\.py)\)", text):
        assert (MILESTONES / link).is_file(), link


# ----------------------------------------------------------------------------------------------
# 3. The README's C quick start, verbatim
# ----------------------------------------------------------------------------------------------

def _readme_block(marker: str) -> str:
    text = README.read_text(encoding="utf-8")
    m = re.search(r"<!-- new-user-test: " + re.escape(marker) + r" -->\n```[a-z]*\n(.*?)```", text, re.S)
    assert m, f"README.md has no fenced block marked <!-- new-user-test: {marker} -->"
    return m.group(1)


def _normalise_isa(text: str) -> str:
    text = re.sub(r"sgemm:(scalar|avx2|avx512|neon)(:narrow)?", "sgemm:<isa>", text)
    return re.sub(r"ISA (scalar|avx2|avx512|neon)\b", "ISA <isa>", text)


@pytest.mark.skipif(not all(shutil.which(t) for t in ("cmake", "cc", "pkg-config"))
                    or not (shutil.which("make") or os.environ.get("CMAKE_GENERATOR")),
                    reason="needs cmake, cc, pkg-config and make (the README's tools)")
def test_readme_c_quickstart_runs_as_written(tmp_path):
    script = _readme_block("c-quickstart")
    program = _readme_block("hello.c")
    expected = _readme_block("hello-output")
    # A copy of what the CMake build reads stands in for the repository root.
    src = tmp_path / "tinytorch"
    src.mkdir()
    shutil.copy2(ROOT / "CMakeLists.txt", src)
    for folder in ("cmake", "include", "runtime", "tests/c"):
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (src / "hello.c").write_text(program, encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PKG_CONFIG_PATH", "LD_LIBRARY_PATH", "CMAKE_PREFIX_PATH", "TINYTORCH_ISA")}
    env.update(HOME=str(home), CMAKE_BUILD_PARALLEL_LEVEL="2")
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=str(src), env=env,
                         capture_output=True, text=True, timeout=280)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    out_lines = run.stdout.strip().splitlines()[-len(expected.strip().splitlines()):]
    assert _normalise_isa("\n".join(out_lines)) == _normalise_isa(expected.strip())
    # Installed where the README says, and found at run time through the rpath alone.
    assert (home / ".local" / "tinytorch" / "lib" / "pkgconfig" / "tinytorch.pc").is_file()
    again = subprocess.run([str(src / "hello")], env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert "C = [[58, 64], [139, 154]]" in again.stdout


def test_pkg_config_file_carries_an_rpath():
    pc = (ROOT / "cmake" / "tinytorch.pc.in").read_text(encoding="utf-8")
    libs = next(line for line in pc.splitlines() if line.startswith("Libs:"))
    assert "-Wl,-rpath,${libdir}" in libs and "-L${libdir}" in libs


# ----------------------------------------------------------------------------------------------
# 4. MLPerf memory figures are measured
# ----------------------------------------------------------------------------------------------

def _mlperf(model, x):
    from tinytorch.perf.benchmarking import MLPerf
    return MLPerf(warmup=1, offline_batch_size=16).run_standard_benchmark(model, "toy", test_inputs=x)


def test_mlperf_memory_fields_are_true():
    from tinytorch.core.activations import GELU
    from tinytorch.core.layers import Linear, Sequential
    tinytorch.manual_seed(0)
    model = Sequential(Linear(128, 256), GELU(), Linear(256, 10))
    x = np.random.default_rng(0).standard_normal((48, 128)).astype(np.float32)
    res = _mlperf(model, x)
    # 16 x 256 float32 activations alone are 16 KiB: the Python-heap peak cannot be 0
    assert res["python_peak_bytes"] >= 16 * 256 * 4
    assert res["peak_memory_bytes"] == res["python_peak_bytes"]
    assert "runtime_peak_memory_bytes" not in res and "combined_peak_memory_bytes" not in res
    if native.available():
        assert res["runtime_storage_peak_bytes"] == native.memory_stats()["peak_bytes"]
        assert res["runtime_storage_allocations"] >= 0
        assert "runtime-owned storage" in res["report"]
    else:
        assert res["runtime_storage_peak_bytes"] is None


@pytest.mark.skipif(not native.available(), reason="needs the native runtime")
def test_mlperf_runtime_storage_field_sees_runtime_allocations():
    from tinytorch import _native
    nbytes = 1 << 20

    def model(x):  # allocates 1 MiB of runtime storage per call, and frees it
        handle = ctypes.c_void_p()
        _native.check(_native.lib.tt_storage_create(nbytes, ctypes.byref(handle)), "storage_create")
        _native.check(_native.lib.tt_storage_release(handle), "storage_release")
        return np.asarray(x.data).sum(axis=1, keepdims=True)

    base = native.memory_stats()["bytes_in_use"]
    res = _mlperf(model, np.ones((32, 4), np.float32))
    assert res["runtime_storage_peak_bytes"] >= base + nbytes
    assert res["runtime_storage_peak_bytes"] == native.memory_stats()["peak_bytes"]
    assert res["runtime_storage_allocations"] == 2  # two offline batches in the measured pass


# ----------------------------------------------------------------------------------------------
# 6. Docs reference only the repository
# ----------------------------------------------------------------------------------------------

def _markdown_files():
    skip = {".git", ".venv", "build", "node_modules", ".pytest_cache"}
    for path in ROOT.rglob("*.md"):
        rel = path.relative_to(ROOT)
        if not (set(rel.parts) & skip) and not rel.parts[0].startswith("build"):
            yield path


def test_markdown_links_stay_inside_the_repository():
    bad = []
    for md in _markdown_files():
        text = md.read_text(encoding="utf-8")
        if re.search(r"\.\./shared/|/work/shared|TOOLCHAIN-NOTES", text):
            bad.append(f"{md.relative_to(ROOT)}: names a file outside the repository")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            resolved = (md.parent / target.split("#", 1)[0]).resolve()
            if ROOT not in resolved.parents and resolved != ROOT:
                bad.append(f"{md.relative_to(ROOT)}: {target} leaves the repository")
            elif not resolved.exists():
                bad.append(f"{md.relative_to(ROOT)}: {target} does not exist")
    assert not bad, "\n".join(bad)


# ----------------------------------------------------------------------------------------------
# 4. The test command installs the tools it calls
# ----------------------------------------------------------------------------------------------

def test_test_extra_brings_cmake_ctest_and_ninja():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        pytest.skip("tomllib needs Python 3.11")
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    names = {re.split(r"[<>=!~ \[]", req, maxsplit=1)[0].lower() for req in extra}
    assert {"cmake", "ninja"} <= names, extra  # the cmake wheel ships ctest
    script = (ROOT / "tests" / "run_all.sh").read_text()
    # run_all.sh puts the environment's own bin folder first, so the extra's tools are the ones run
    assert 'PATH="$(dirname "$("$PY" -c \'import sys; print(sys.executable)\')"):$PATH"' in script
    bin_dir = Path(sys.executable).parent
    for tool in ("cmake", "ctest", "ninja"):
        assert (bin_dir / tool).exists() or shutil.which(tool), f"{tool} is not installed"

#!/usr/bin/env bash
# The whole test suite: installs what the tests need, then runs
#   1. ctest on a Release build of the runtime (C tests + an out-of-tree install consumer),
#   2. ctest on an AddressSanitizer + UndefinedBehaviorSanitizer build,
#   3. pytest on everything under tests/,
#   4. the native-kernel tests again under every instruction set this CPU supports,
#   5. the libFuzzer harnesses (tests/c/fuzz/run.sh: clang, ASan + UBSan; TT_FUZZ_SECONDS
#      per harness, 60 by default; TT_SKIP_FUZZ=1 skips the stage).
# Run it from the repository root: `bash tests/run_all.sh`. Any failure stops it with a
# non-zero exit. Set TT_SKIP_INSTALL=1 to reuse an environment that is already set up.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
JOBS=${JOBS:-2}

step() { printf '\n==== %s ====\n' "$*"; }

if [ "${TT_SKIP_INSTALL:-0}" != "1" ]; then
  step "install the package (editable) with its test dependencies"
  "$PY" -m pip install --quiet -e ".[test]"
fi
# cmake, ctest and ninja come from the [test] extra (PyPI wheels): use the environment's own,
# so a machine with Python but no system CMake runs this script as written.
PATH="$(dirname "$("$PY" -c 'import sys; print(sys.executable)')"):$PATH"
for tool in cmake ctest ninja; do
  command -v "$tool" > /dev/null || { echo "run_all.sh: $tool not found (pip install -e '.[test]')" >&2; exit 1; }
done

step "ctest: Release build"
cmake -S . -B build/ctest-release -G Ninja -DCMAKE_BUILD_TYPE=Release > build-ctest-release.log 2>&1 \
  || { cat build-ctest-release.log; exit 1; }
cmake --build build/ctest-release -j "$JOBS"
ctest --test-dir build/ctest-release --output-on-failure -j "$JOBS"

step "ctest: sanitizer build (address + undefined)"
cmake -S . -B build/ctest-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTT_SANITIZE=ON > build-ctest-asan.log 2>&1 \
  || { cat build-ctest-asan.log; exit 1; }
cmake --build build/ctest-asan -j "$JOBS"
# The install-consumer test links the sanitized library into a plain program: skip it here.
ctest --test-dir build/ctest-asan --output-on-failure -j "$JOBS" -E install_consumer
rm -f build-ctest-release.log build-ctest-asan.log

step "packaging: a wheel carries the freshly built library, never the editable copy"
wheel_dir=$(mktemp -d)
mkdir -p python/tinytorch/_lib_editable
"$PY" -m pip wheel --quiet --no-deps -w "$wheel_dir" . > "$wheel_dir/log" 2>&1 || { cat "$wheel_dir/log"; exit 1; }
"$PY" - "$wheel_dir" <<'PYEOF'
import glob, sys, zipfile
wheels = glob.glob(sys.argv[1] + "/tinytorch-*.whl")
assert len(wheels) == 1, wheels
names = zipfile.ZipFile(wheels[0]).namelist()
libs = sorted(n for n in names if "libtinytorch" in n)
# the runtime, plus libtinytorch_cuda where CMake found nvcc (the CUDA stages); never an
# editable build's copy
core = [n for n in libs if n in ("tinytorch/libtinytorch.so", "tinytorch/libtinytorch.dylib")]
assert len(core) == 1, libs
assert set(libs) - set(core) <= {"tinytorch/libtinytorch_cuda.so"}, libs
assert "tinytorch/data/digits.npz" in names, "the digits data is missing from the wheel"
# `tinytorch milestone` runs outside a checkout: the milestones ship inside the package
shipped = {n for n in names if n.startswith("tinytorch/milestones/")}
assert {"tinytorch/milestones/_runtime.py", "tinytorch/milestones/05_2017_transformer/data/tiny_shakespeare.txt",
        "tinytorch/milestones/07_custom_kernels/01_kernel_ladder.py"} <= shipped, sorted(shipped)
assert "tinytorch/scorecard/peak.c" in names, "peak.c (the scorecard's FMA ceiling) is missing from the wheel"
print(f"{wheels[0].rsplit('/', 1)[1]}: {', '.join(libs)} and {len(names)} files, no editable copy")
PYEOF
rm -rf "$wheel_dir"

run_pytest() {
  set +e
  "$PY" -m pytest "$@"
  local rc=$?
  set -e
  if [ $rc -eq 5 ]; then
    echo "pytest collected no tests for: $* (that is a failure here)" >&2
    exit 1
  elif [ $rc -ne 0 ]; then
    exit $rc
  fi
}

step "pytest: the whole suite"
run_pytest -q tests

for isa in $("$PY" -c "import tinytorch.native as n; i = n.info(); print(' '.join(x for x in i['isa_detected'] if x in i['isas_compiled']))"); do
  step "pytest: native kernels with TINYTORCH_ISA=$isa"
  TINYTORCH_ISA=$isa run_pytest -q tests/native tests/extensions/test_simd_ops.py
done

if [ "${TT_SKIP_FUZZ:-0}" != "1" ]; then
  step "fuzzing: libFuzzer harnesses (clang, address + undefined)"
  JOBS="$JOBS" bash tests/c/fuzz/run.sh
fi

echo
echo "all test stages passed"

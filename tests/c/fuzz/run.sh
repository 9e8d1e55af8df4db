#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, ASan + UBSan + libFuzzer, -DTT_FUZZ=ON) and runs
# each for a bounded time over a fresh copy of its seed corpus. Any finding (a failed
# check, a sanitizer report, a hang past -timeout, a leak, running out of memory) fails the
# script, which prints the input that caused it as hex, with the command that replays it.
#
#   bash tests/c/fuzz/run.sh                     # every harness, TT_FUZZ_SECONDS each
#   TT_FUZZ_SECONDS=300 bash tests/c/fuzz/run.sh gemm
#
# Environment:
#   TT_FUZZ_SECONDS    fuzzing time per harness (default 60: about 6 minutes for all six)
#   TT_FUZZ_BUILD_DIR  build folder (default build/fuzz); runs go to <build>/runs/<harness>/
#   TT_FUZZ_TIMEOUT    seconds one input may take before it counts as a hang (default 10)
#   JOBS               build parallelism (default 2)
#   TT_FUZZ_KNOWN      triage only: tolerate named known findings (see fuzz_util.h)
# Replaying one input: <build>/tests/c/fuzz/fuzz_<harness> <file>
set -euo pipefail
cd "$(dirname "$0")/../../.."
SECONDS_EACH=${TT_FUZZ_SECONDS:-60}
BUILD=${TT_FUZZ_BUILD_DIR:-build/fuzz}
TIMEOUT=${TT_FUZZ_TIMEOUT:-10}
JOBS=${JOBS:-2}
HARNESSES=("$@")
[ ${#HARNESSES[@]} -gt 0 ] || HARNESSES=(gemm gelu tensor fusion attention rows)

for tool in clang clang++; do
  command -v "$tool" > /dev/null || { echo "fuzz: $tool not found (apt-get install clang llvm)" >&2; exit 1; }
done

log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "fuzz: building the harnesses in $BUILD"
if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
         -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DTT_FUZZ=ON &&
       cmake --build "$BUILD" -j "$JOBS" --target fuzzers; } > "$log" 2>&1; then
  cat "$log"
  echo "fuzz: the build failed" >&2
  exit 1
fi

# Kernels run 1-3 threads on a shared machine: the pool's waiting workers sleep after a
# short spin (TINYTORCH_SPIN_US) and back off when the machine is busy, so nothing to set here.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
command -v llvm-symbolizer > /dev/null && export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$(command -v llvm-symbolizer)}

failed=()
summary=()
for h in "${HARNESSES[@]}"; do
  bin=$BUILD/tests/c/fuzz/fuzz_$h
  seeds=tests/c/fuzz/corpus/$h
  [ -x "$bin" ] && [ -d "$seeds" ] || { echo "fuzz: no harness '$h'" >&2; exit 1; }
  run=$BUILD/runs/$h
  rm -rf "$run" && mkdir -p "$run/corpus" "$run/artifacts"
  cp "$seeds"/* "$run/corpus/"
  echo "fuzz: $h for ${SECONDS_EACH}s (log: $run/fuzz.log)"
  start=$(date +%s)
  set +e
  "$bin" -max_total_time="$SECONDS_EACH" -timeout="$TIMEOUT" -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$run/artifacts/" "$run/corpus" > "$run/fuzz.log" 2>&1
  rc=$?
  set -e
  took=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$run/fuzz.log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$run/fuzz.log" | tail -1 || true)
  summary+=("$(printf '%-9s %4ss  %9s executions  %s  corpus %s' "$h" "$took" "${execs:-?}" "${cov:-cov: ?}" "$(ls "$run/corpus" | wc -l)")")
  artifacts=$(ls "$run/artifacts" 2>/dev/null || true)
  if [ $rc -ne 0 ] || [ -n "$artifacts" ]; then
    failed+=("$h")
    echo "fuzz: $h FOUND A PROBLEM (exit $rc). The report:" >&2
    # From just before the first report (the harness's ==fuzz== lines and the call it
    # describes, a sanitizer report, a libFuzzer hang/OOM verdict), without libFuzzer's frames.
    first=$(grep -n -m1 -E '==fuzz==|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|ALARM: working on the last Unit' \
      "$run/fuzz.log" | cut -d: -f1 || true)
    if [ -n "$first" ]; then
      tail -n +$(( first > 3 ? first - 3 : 1 )) "$run/fuzz.log" | grep -v -E ' in fuzzer::| in (__libc_start|_start|main) ' | head -50 >&2
    else
      tail -40 "$run/fuzz.log" >&2
    fi
    for a in $artifacts; do
      echo "fuzz: input $run/artifacts/$a ($(wc -c < "$run/artifacts/$a") bytes), as hex:" >&2
      od -An -tx1 -v "$run/artifacts/$a" >&2
      echo "fuzz: replay with: $bin $run/artifacts/$a" >&2
    done
  fi
done

echo
echo "fuzz summary:"
printf '  %s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: no findings"

#!/usr/bin/env bash
# Fuzzes every target in fuzz/ with libFuzzer for SECONDS each (default 60).
#   scripts/fuzz.sh [SECONDS]
# Builds with clang (-fsanitize=fuzzer,address,undefined) in build-fuzz/
# (FUZZ_BUILD_DIR), installing clang and libFuzzer with apt-get if they are
# missing. New inputs go to build-fuzz/corpus/<target>/ (the seeds in
# fuzz/corpus/ are read, never written); crashes to build-fuzz/crashes/,
# logs to build-fuzz/logs/. Exits 1 if any target crashed: copy the crash
# file into fuzz/corpus/<target>/ once fixed, so the gcc build's ctest
# (fuzz.<target>, label unit) keeps it fixed.
set -euo pipefail
seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${FUZZ_BUILD_DIR:-$root/build-fuzz}"
jobs="${FUZZ_JOBS:-2}"

libfuzzer_works() {
  command -v clang++ >/dev/null 2>&1 || return 1
  local probe
  probe="$(mktemp -d)"
  printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
    > "$probe/p.cc"
  clang++ -fsanitize=fuzzer "$probe/p.cc" -o "$probe/p" >/dev/null 2>&1
  local rc=$?
  rm -rf "$probe"
  return $rc
}
if ! libfuzzer_works; then
  echo "fuzz.sh: installing clang and libFuzzer" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq clang libfuzzer-14-dev
  libfuzzer_works || { echo "fuzz.sh: clang cannot link -fsanitize=fuzzer" >&2; exit 2; }
fi

# Our code is instrumented (coverage, ASan, UBSan); UB aborts like a crash.
# vptr is off: protobuf and gRPC come precompiled by gcc, without it.
sanitize="-fsanitize=address,undefined -fno-sanitize=vptr -fno-sanitize-recover=undefined"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++ -DOUTBOX_LIBFUZZER=ON \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link $sanitize -fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS="$sanitize" >/dev/null

targets=()
for src in "$root"/fuzz/*_fuzz.cc; do
  name="$(basename "$src" _fuzz.cc)"
  targets+=("$name")
done
cmake --build "$build" -j "$jobs" --target "${targets[@]/#/fuzz_}"

mkdir -p "$build/crashes" "$build/logs"
failed=()
for name in "${targets[@]}"; do
  mkdir -p "$build/corpus/$name"
  log="$build/logs/$name.log"
  echo "fuzz.sh: $name for ${seconds}s"
  set +e
  ASAN_OPTIONS="abort_on_error=1:detect_leaks=1" UBSAN_OPTIONS="print_stacktrace=1" \
    "$build/bin/fuzz_$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$build/crashes/$name-" \
    "$build/corpus/$name" "$root/fuzz/corpus/$name" >"$log" 2>&1
  rc=$?
  set -e
  runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)"
  if [ "$rc" -ne 0 ]; then
    failed+=("$name")
    echo "fuzz.sh: $name CRASHED after ${runs:-?} runs (exit $rc); see $log and $build/crashes/"
  else
    echo "fuzz.sh: $name ok, ${runs:-?} runs, corpus $(ls "$build/corpus/$name" | wc -l) files"
  fi
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz.sh: crashed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz.sh: no crashes"

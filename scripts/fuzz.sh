#!/usr/bin/env bash
# Coverage-guided fuzzing of every input quantenergy parses: cargo-fuzz + libFuzzer.
#
#   scripts/fuzz.sh [SECONDS] [TARGET…]     each target (default: all) for SECONDS (default 20)
#
# Builds every target of fuzz/ once (`cargo +nightly fuzz build -O -a`: optimized, with debug
# assertions and overflow checks, AddressSanitizer), then runs each with -max_total_time=SECONDS,
# -timeout=1 (no input may take longer than a second), -rss_limit_mb=2048, one job on one core
# (-jobs=1 -workers=1), and its dictionary from fuzz/dict/ where it has one. Seeds are read from
# fuzz/corpus/<target>/ (committed, small); what a run finds goes to fuzz/grown/<target>/ (ignored).
# Prints per target: execs, execs/s, final cov/ft, corpus size. Exits non-zero, naming the target
# and the crash / timeout / OOM file (under fuzz/artifacts/<target>/), if any target failed.
#
# Needs `cargo +nightly` and cargo-fuzz (`cargo install cargo-fuzz --locked`). Environment:
# CARGO_TARGET_DIR (default fuzz/target), FUZZ_TOOLCHAIN (default nightly), FUZZ_BUILD_FLAGS
# (extra `cargo fuzz build` flags), FUZZ_NICE (default 19: runs under `nice`), FUZZ_PARALLEL
# (targets run at once, default 1).
# Reproduce a crash: $CARGO_TARGET_DIR/<triple>/release/<target> <crash file>
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

ALL=(validate_report share_link markdown anchors_csv sweep_plan gguf_header safetensors_header
  config_json server_stream cli_args)

SECS=${1:-20}
[ $# -gt 0 ] && shift
case "$SECS" in '' | *[!0-9]*) echo "usage: scripts/fuzz.sh [SECONDS] [TARGET…]" >&2; exit 2 ;; esac
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=("${ALL[@]}")
for t in "${TARGETS[@]}"; do
  [ -f "fuzz/fuzz_targets/$t.rs" ] || { echo "fuzz.sh: unknown target $t (${ALL[*]})" >&2; exit 2; }
done

TOOLCHAIN=${FUZZ_TOOLCHAIN:-nightly}
export CARGO_TARGET_DIR=$(realpath -m "${CARGO_TARGET_DIR:-$ROOT/fuzz/target}")
NICE=(nice -n "${FUZZ_NICE:-19}")
TRIPLE=$(rustc "+$TOOLCHAIN" -vV | sed -n 's/^host: //p')
BIN_DIR=$CARGO_TARGET_DIR/$TRIPLE/release

dict_of() {
  case "$1" in
    validate_report | markdown) echo report ;;
    anchors_csv) echo anchors ;;
    sweep_plan) echo plan ;;
    gguf_header) echo gguf ;;
    safetensors_header | config_json) echo safetensors ;;
    server_stream) echo stream ;;
    cli_args) echo cli ;;
  esac
}

echo "==> cargo +$TOOLCHAIN fuzz build -O -a (target dir $CARGO_TARGET_DIR)"
# -O -a: optimized, with debug assertions and overflow checks; 16 codegen units (cargo-fuzz's
# default is 1) let the build use both cores on the large crates.
# shellcheck disable=SC2086
if ! "${NICE[@]}" cargo "+$TOOLCHAIN" fuzz build -O -a --codegen-units 16 ${FUZZ_BUILD_FLAGS:-}; then
  echo "fuzz.sh: build failed" >&2
  exit 1
fi

# One target: its run, its summary line ($logs/summary) and, if it failed, why ($logs/failed).
run_target() {
  local t=$1
  local grown=$ROOT/fuzz/grown/$t artifacts=$ROOT/fuzz/artifacts/$t logs=$ROOT/fuzz/logs/$t
  mkdir -p "$grown" "$artifacts" "$logs"
  rm -f "$logs"/fuzz-*.log "$logs/summary" "$logs/failed"
  local args=(-max_total_time="$SECS" -timeout=1 -rss_limit_mb=2048 -jobs=1 -workers=1
    -print_final_stats=1 -artifact_prefix="$artifacts/")
  local d
  d=$(dict_of "$t")
  [ -n "$d" ] && args+=(-dict="$ROOT/fuzz/dict/$d.dict")
  echo "==> $t: ${SECS}s${d:+, dictionary $d.dict}"
  local before after rc log last execs eps cov ft corp line crash kind
  before=$(ls "$artifacts" | wc -l)
  # With -jobs, libFuzzer runs the fuzzing in a child that logs to ./fuzz-0.log.
  (cd "$logs" && "${NICE[@]}" "$BIN_DIR/$t" "${args[@]}" "$grown" "$ROOT/fuzz/corpus/$t") \
    >"$logs/run.log" 2>&1
  rc=$?
  log=$logs/fuzz-0.log
  [ -f "$log" ] || log=$logs/run.log
  # The last status line: "#123456 DONE cov: 812 ft: 2931 corp: 301/52Kb lim: … exec/s: 6172 …".
  last=$(grep -aE '^#[0-9]+' "$log" | tail -1)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")
  ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
  corp=$(sed -nE 's/.* corp: ([0-9]+)\/([0-9]+[a-zA-Z]*).*/\1 inputs, \2/p' <<<"$last")
  line=$(printf '%-20s execs %-10s execs/s %-7s cov %-6s ft %-7s corpus %s' "$t" "${execs:-?}" \
    "${eps:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}")
  echo "$line" >"$logs/summary"
  echo "    $line"
  after=$(ls "$artifacts" | wc -l)
  if [ "$rc" -ne 0 ] || [ "$after" -gt "$before" ]; then
    crash=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    kind=$(grep -aoE 'ERROR: libFuzzer: [a-z-]+|panicked at [^,]*' "$log" | head -1)
    echo "FAILED: $t (exit $rc${kind:+, $kind}): ${crash:-see $log}" >&2
    grep -aA12 -m1 -E 'panicked at|ERROR: libFuzzer|ERROR: AddressSanitizer' "$log" | sed 's/^/    /' >&2
    echo "$t: ${crash:-$log}" >"$logs/failed"
  fi
}

# FUZZ_PARALLEL targets at a time (default 1; each is one libFuzzer process on one core).
PARALLEL=${FUZZ_PARALLEL:-1}
for t in "${TARGETS[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL" ]; do wait -n; done
  run_target "$t" &
done
wait
failed=()
summary=()
for t in "${TARGETS[@]}"; do
  logs=$ROOT/fuzz/logs/$t
  [ -f "$logs/summary" ] && summary+=("$(cat "$logs/summary")")
  [ -f "$logs/failed" ] && failed+=("$(cat "$logs/failed")")
done

echo
echo "==> summary (${SECS}s per target)"
printf '    %s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: ${#failed[@]} target(s) failed:" >&2
  printf '    %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "fuzz.sh: no crash, timeout or OOM in ${#TARGETS[@]} target(s)"

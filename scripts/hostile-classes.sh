#!/usr/bin/env bash
# Issue 31's classes of hostile input, one test (or two) each, run against another revision's
# binary: which of them that build fails. Each test drives the binary only (QE_BIN), so the tests
# of this tree judge an older build as they judge this one.
#
#   scripts/hostile-classes.sh [REV]     default 5e35bbf, the main the issue was filed against
#
# Builds REV's `quantenergy` (debug, in a worktree under target/hostile-rev), then runs each test
# with QE_BIN pointing at it and at this tree's build, and prints a table: class, test, REV, here.
set -uo pipefail
cd "$(dirname "$0")/.."
REV=${1:-5e35bbf}
WT=target/hostile-rev/tree
TESTS=(
  "numbers|cli|measure_refuses_zero_and_oversized_counts_naming_the_flag"
  "special files|cli|missing_paths_and_special_files_get_their_own_words"
  "plan expansion|cli|plan_errors_name_their_file_and_huge_plans_are_refused_at_once"
  "writes outside|cli|outputs_cannot_leave_the_folder_they_were_asked_for"
  "accepted but wrong|cli|validate_says_not_json_for_out_of_range_numbers_and_lone_surrogates"
  "accepted but wrong|cli|model_files_for_our_engines_are_checked_before_a_run"
  "colour|cli|no_colour_codes_when_stderr_is_not_a_terminal"
  "newcomer|cli|an_external_server_that_does_not_answer_is_an_error"
  "newcomer|cli|engine_check_on_the_cpu_needs_to_be_asked_for"
  "newcomer|cli|a_server_dry_run_checks_the_command_without_metering"
  "newcomer|readme|every_readme_example_runs_as_written_or_says_what_it_needs"
)
rm -rf "$WT"; git worktree prune
git worktree add -f --detach "$WT" "$REV" >/dev/null || exit 2
echo "==> building $REV's quantenergy (debug)" >&2
(cd "$WT" && CARGO_TARGET_DIR="$PWD/../target" cargo build -q -p cli) || { echo "build of $REV failed" >&2; exit 2; }
OLD=$(realpath "$WT/../target/debug/quantenergy")
echo "==> building this tree's tests" >&2
cargo test -q -p cli --test cli --test readme --no-run >/dev/null 2>&1 || { echo "this tree's tests do not build" >&2; exit 2; }
HERE=$(realpath target/debug/quantenergy)
printf '| class | test | %s | this tree |\n|---|---|---|---|\n' "$REV"
for t in "${TESTS[@]}"; do
  IFS='|' read -r class file name <<<"$t"
  verdict() { QE_BIN=$1 cargo test -q -p cli --test "$file" -- --exact "$name" >/dev/null 2>&1 && echo passes || echo "**fails**"; }
  printf '| %s | `%s` | %s | %s |\n' "$class" "$name" "$(verdict "$OLD")" "$(verdict "$HERE")"
done
git worktree remove --force "$WT" >/dev/null 2>&1 || true

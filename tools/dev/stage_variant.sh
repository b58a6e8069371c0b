#!/usr/bin/env bash
# Builds a kernel variant for tools/dev/gpu_variants.sh: the working tree plus the changes of REF (a branch
# or commit) against HEAD, built in BUILD_DIR (default build-gdncu, configured as tools/dev/gpu_quick.sh says),
# copied to .devbin/NAME/, then the working tree's files put back and rebuilt (so that BUILD_DIR and
# .devbin/ hold HEAD's binaries again). Only the changed files recompile: seconds, not a full build.
#   tools/dev/stage_variant.sh NAME REF [BUILD_DIR]     e.g. tools/dev/stage_variant.sh nolo my-branch
# REBUILD_HEAD=0: the files are put back but HEAD is not rebuilt (when staging several variants in a row,
# each build then recompiles what the last one and this one changed; HEAD's binaries are in .devbin/).
# The working tree must be clean (its files are overwritten and restored from HEAD).
set -euo pipefail
cd "$(dirname "$0")/../.."
name=${1:?"usage: stage_variant.sh NAME REF [BUILD_DIR]"}
ref=${2:?"usage: stage_variant.sh NAME REF [BUILD_DIR]"}
build=${3:-build-gdncu}
rebuild_head=${REBUILD_HEAD:-1}
[[ $rebuild_head == 0 || $rebuild_head == 1 ]] ||
  { echo "stage_variant: REBUILD_HEAD must be 0 (leave HEAD unbuilt) or 1 (rebuild it), got '$rebuild_head'" >&2; exit 2; }
[[ -d $build ]] || { echo "stage_variant: no build directory $build (see tools/dev/gpu_quick.sh)" >&2; exit 2; }
git rev-parse --verify --quiet "$ref^{commit}" > /dev/null || { echo "stage_variant: unknown ref $ref" >&2; exit 2; }
if [[ -n $(git status --porcelain --untracked-files=no) ]]; then
  echo "stage_variant: the working tree has uncommitted changes; commit or stash them first" >&2
  exit 2
fi
mapfile -t files < <(git diff --name-only HEAD "$ref")
[[ ${#files[@]} -gt 0 ]] || { echo "stage_variant: $ref does not differ from HEAD" >&2; exit 2; }
restore() {  # HEAD's version of each file, or none where REF added it
  local f
  for f in "${files[@]}"; do
    if git cat-file -e "HEAD:$f" 2> /dev/null; then git checkout HEAD -- "$f"; else rm -f -- "$f"; fi
  done
}
trap restore EXIT
git diff HEAD "$ref" | git apply
targets=(test_gpu bench_gdn)
train=false  # bench_train too when HEAD's is staged (TRAIN=1 in gpu_variants.sh)
[[ -x .devbin/bench_train ]] && train=true && targets+=(bench_train)
cmake --build "$build" --target "${targets[@]}" -j"$(nproc)" > "/tmp/stage_$name.log" 2>&1 ||
  { echo "stage_variant: build of $name failed:" >&2; tail -30 "/tmp/stage_$name.log" >&2; exit 1; }
mkdir -p ".devbin/$name"
cp "$build/tests/test_gpu" "$build/bench/bench_gdn" ".devbin/$name/"
$train && cp "$build/bench/bench_train" ".devbin/$name/"
restore
trap - EXIT
if [[ $rebuild_head == 0 ]]; then
  echo "staged .devbin/$name ($ref: ${files[*]}); $build not rebuilt (REBUILD_HEAD=0)"
  exit 0
fi
cmake --build "$build" --target "${targets[@]}" -j"$(nproc)" > "/tmp/stage_head.log" 2>&1 ||
  { echo "stage_variant: rebuilding HEAD failed (see /tmp/stage_head.log)" >&2; exit 1; }
echo "staged .devbin/$name ($ref: ${files[*]}); $build holds HEAD's build again"

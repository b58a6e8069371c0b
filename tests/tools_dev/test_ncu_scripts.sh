#!/usr/bin/env bash
# tools/dev/ncu_summary.py, ncu_pipes.py, ncu_sass_summary.py: a small CSV of each kind gives its table;
# a missing file, a file that is not ncu's and a wrong usage give a clear error.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
# --page raw: a header, a units row, one row per launch
metrics=$(python3 "$repo/tools/dev/ncu_pipes.py" --metrics) || fail "ncu_pipes.py --metrics failed"
{
  echo "\"Kernel Name\",\"$(echo "$metrics" | sed 's/,/","/g')\""
  echo "\"\",\"nsecond\",\"%\",\"%\",\"%\",\"%\",\"\",\"\",\"%\",\"%\""
  echo "\"void dt::(anonymous namespace)::prep<64>(Args)\",\"82000\",\"34\",\"43\",\"20\",\"47\",\"100\",\"1000\",\"58\",\"31\""
  echo "\"void dt::(anonymous namespace)::prep<64>(Args)\",\"84000\",\"34\",\"43\",\"20\",\"47\",\"100\",\"1000\",\"58\",\"31\""
} > "$tmp/pipes.csv"
out=$(python3 "$repo/tools/dev/ncu_pipes.py" "$tmp/pipes.csv") || fail "ncu_pipes.py failed: $out"
echo "$out" | grep -qE "dt::prep<64> +83\.0 +34\.0 +43\.0 +20\.0 +47\.0 +10\.0" || fail "ncu_pipes.py: unexpected table: $out"
out=$(python3 "$repo/tools/dev/ncu_summary.py" "$tmp/pipes.csv") || fail "ncu_summary.py failed: $out"
echo "$out" | grep -qE "dt::prep<64> +0\.166 +100\.0% +2 +83\.0" || fail "ncu_summary.py: unexpected table: $out"
# --page source --print-source cuda,sass: per file, a header and a row per source line
{
  echo '"File Path","/x/kernels/cuda/gdn_tc_forward.cu"'
  echo '"Function Name","prep<64>"'
  echo '"Line No","Source","Warp Stall Sampling (All Samples)","Instructions Executed","L1 Wavefronts Shared","L1 Wavefronts Shared Excessive","stall_barrier","stall_short_sb"'
  echo '"127","  sAT[i] = v;","30","400","20","10","0","30"'
  echo '"644","  __syncthreads();","70","10","0","0","70","0"'
} > "$tmp/sass.csv"
out=$(python3 "$repo/tools/dev/ncu_sass_summary.py" "$tmp/sass.csv" 5) || fail "ncu_sass_summary.py failed: $out"
echo "$out" | grep -q "100 samples, 410 warp instructions" || fail "ncu_sass_summary.py: unexpected totals: $out"
echo "$out" | grep -qE "70\.0% +10 +gdn_tc_forward.cu:644 +barrier100" || fail "ncu_sass_summary.py: unexpected rows: $out"
echo "$out" | grep -q "20 wavefronts, 10 of them excess (50%)" || fail "ncu_sass_summary.py: unexpected excess: $out"
# Errors
# --decode-step: the launches after the second-to-last advance_kernel through the last one.
{
  echo '"Kernel Name","gpu__time_duration.sum"'
  echo '"","nsecond"'
  for t in 900 2000 50 1000 3000 60 1500 4000 70; do
    case $t in 50|60|70) k="dt::cuda::advance_kernel(int *)" ;; 1*) k="void gemv_kernel(Params)" ;; *) k="void norm_kernel(Params)" ;; esac
    echo "\"$k\",\"$t\""
  done
} > "$tmp/steps.csv"
out=$(python3 "$repo/tools/dev/ncu_summary.py" --decode-step "$tmp/steps.csv") || fail "--decode-step failed: $out"
echo "$out" | grep -q "^3 kernel launches, 0.006 ms" || fail "--decode-step: not the last step: $out"
echo "$out" | grep -qE "gemv_kernel +0\.002 +" || fail "--decode-step: unexpected rows: $out"
head -5 "$tmp/steps.csv" > "$tmp/one_step.csv"
expect_error "1 decode steps" ncu_summary.py --decode-step "$tmp/one_step.csv"
for s in ncu_summary.py ncu_pipes.py ncu_sass_summary.py; do
  expect_error "cannot read" "$s" "$tmp/none.csv"
done
echo "not a csv" > "$tmp/bad.csv"
expect_error "no CSV rows" ncu_summary.py "$tmp/bad.csv"
expect_error "no CSV rows" ncu_pipes.py "$tmp/bad.csv"
expect_error "no source rows" ncu_sass_summary.py "$tmp/bad.csv"
echo '"Kernel Name","gpu__time_duration.sum"' > "$tmp/time_only.csv"
expect_error "no column sm__warps_active" ncu_pipes.py "$tmp/time_only.csv"
expect_error "usage" ncu_sass_summary.py "$tmp/sass.csv" many
echo "ncu scripts: all checks passed"

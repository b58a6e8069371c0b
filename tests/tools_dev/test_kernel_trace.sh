#!/usr/bin/env bash
# tools/dev/kernel_trace.py: a small trace of three whole steps gives the step times, each kernel's
# row and the last step's sequence with its gaps; a missing file, a CSV that is not a trace, a
# malformed row and a trace without two step openings give a clear error.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
{
  echo "start,end,graph,grid,block,name"
  for s in 0 1 2 3; do
    t=$((s * 10000))
    echo "$t,$((t + 1000)),1,1,256,void dt::cuda::(anonymous namespace)::embedding_forward_kernel<8>(unsigned short*; int const*)"
    echo "$((t + 800)),$((t + 5000)),1,387,256,void dt::cuda::(anonymous namespace)::gemv_kernel<1; false>(dt::cuda::GemvParams)"
    echo "$((t + 4000)),$((t + 9000)),1,12,256,void dt::cuda::(anonymous namespace)::gdn_step_split_kernel<16>(dt::cuda::GdnStepParams)"
  done
} > "$tmp/tr.csv"
out=$(python3 "$repo/tools/dev/kernel_trace.py" "$tmp/tr.csv") || fail "kernel_trace.py failed: $out"
echo "$out" | grep -q "12 kernels; 3 steps: mean 10.0 us" || fail "unexpected header: $out"
echo "$out" | grep -qE "gemv_kernel<1; false> g387x256 +1\.0 +4\.20 +4\.2" || fail "unexpected gemv row: $out"
echo "$out" | grep -qE "^ +4\.0 +5\.00 +-1\.00  dt::cuda::gdn_step_split_kernel<16> g12x256" || fail "unexpected sequence: $out"
out=$(python3 "$repo/tools/dev/kernel_trace.py" "$tmp/tr.csv" --steps 1) || fail "--steps failed: $out"
echo "$out" | grep -q "1 steps" || fail "--steps 1 gave: $out"
expect_error "cannot read" kernel_trace.py "$tmp/none.csv"
echo "start,end,name" > "$tmp/other.csv"
expect_error "no column grid, block" kernel_trace.py "$tmp/other.csv"
{ head -1 "$tmp/tr.csv"; echo "x,1,1,1,1,k"; } > "$tmp/bad.csv"
expect_error "bad.csv:2: a malformed row" kernel_trace.py "$tmp/bad.csv"
expect_error "fewer than two launches of 'argmax'" kernel_trace.py "$tmp/tr.csv" --step-kernel argmax
echo "kernel_trace.py: OK"

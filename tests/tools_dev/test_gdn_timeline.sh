#!/usr/bin/env bash
# tools/dev/gdn_timeline.py: a small `bench_gdn --timeline` CSV gives each kernel's row (CTAs, span, SM
# time, SMs, a CTA's mean time, the clock) and a PNG; a missing file, a CSV that is not the timeline's,
# a malformed row and an unknown shape give a clear error; so does staging a build without the stamps.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cat > "$tmp/tl.csv" << 'CSV'
shape,kernel,sm,start_us,end_us,cycles
B1_T128_H1_D64,prep,0,0.000,10.000,18000
B1_T128_H1_D64,prep,1,0.000,20.000,36000
B1_T128_H1_D64,state_fwd,2,5.000,45.000,72000
B2_T64_H1_D64,grad_wy,3,1.000,3.000,3600
CSV
out=$(python3 "$repo/tools/dev/gdn_timeline.py" "$tmp/tl.csv") || fail "gdn_timeline.py failed: $out"
echo "$out" | grep -q "B1_T128_H1_D64: 3 CTAs, 45.0 us" || fail "unexpected header: $out"
echo "$out" | grep -qE "prep +2 +0\.0 +20\.0 +0\.03 +2 +15\.00 +1800" || fail "unexpected prep row: $out"
echo "$out" | grep -qE "state_fwd +1 +5\.0 +45\.0 +0\.04 +1 +40\.00 +1800" || fail "unexpected state_fwd row: $out"
out=$(python3 "$repo/tools/dev/gdn_timeline.py" "$tmp/tl.csv" --shape B2_T64_H1_D64) || fail "--shape failed: $out"
echo "$out" | grep -q "B1_T128" && fail "--shape printed another shape: $out"
if python3 -c "import matplotlib" 2> /dev/null; then
  python3 "$repo/tools/dev/gdn_timeline.py" "$tmp/tl.csv" --png "$tmp/tl.png" > /dev/null || fail "--png failed"
  [[ -s "$tmp/tl.png" ]] || fail "--png wrote no file"
fi
expect_error "cannot read" gdn_timeline.py "$tmp/none.csv"
echo "shape,kernel,sm,start_us,end_us" > "$tmp/old.csv"
expect_error "no column cycles" gdn_timeline.py "$tmp/old.csv"
{ head -1 "$tmp/tl.csv"; echo "B1_T128_H1_D64,prep,x,0,1,2"; } > "$tmp/bad.csv"
expect_error "bad.csv:2: a malformed row" gdn_timeline.py "$tmp/bad.csv"
head -1 "$tmp/tl.csv" > "$tmp/empty.csv"
expect_error "no stamps" gdn_timeline.py "$tmp/empty.csv"
expect_error "no shape B9" gdn_timeline.py "$tmp/tl.csv" --shape B9
# gpu_quick.sh --stage-timeline takes only a build configured with the stamps, and says so
if bash "$repo/tools/dev/gpu_quick.sh" --stage-timeline "$tmp" > /dev/null 2> "$tmp/err"; then
  fail "gpu_quick.sh --stage-timeline accepted a directory that is no timeline build"
fi
grep -q -- "-DDELTATRON_GDN_TIMELINE=ON" "$tmp/err" || { echo "gpu_quick.sh: wrong message:"; cat "$tmp/err"; exit 1; }
if bash "$repo/tools/dev/gpu_quick.sh" --stage-timeline > /dev/null 2> "$tmp/err"; then fail "--stage-timeline without a directory"; fi
grep -q "usage" "$tmp/err" || { echo "gpu_quick.sh: no usage message:"; cat "$tmp/err"; exit 1; }
echo "gdn_timeline.py: all checks passed"

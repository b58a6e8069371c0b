#!/usr/bin/env bash
# bench_gdn: bad options are refused with a message naming the option, before any GPU work (so this
# runs without a GPU). Usage: test_bench_gdn_args.sh path/to/bench_gdn
set -uo pipefail
bin=${1:?"usage: test_bench_gdn_args.sh BENCH_GDN"}
err=$(mktemp)
trap 'rm -f "$err"' EXIT
expect_refused() {  # expect_refused "message part" args...
  local want=$1
  shift
  if "$bin" "$@" > /dev/null 2> "$err"; then
    echo "bench_gdn $*: expected failure"; exit 1
  fi
  grep -q -- "$want" "$err" || { echo "bench_gdn $*: wrong message (want '$want'):"; cat "$err"; exit 1; }
}
expect_refused "--overlap" --overlap 2
expect_refused "--overlap" --overlap -2
expect_refused "--chase-prep" --chase-prep 2
expect_refused "--qk-persist" --qk-persist 2
# --timeline needs a build with the stamps (-DDELTATRON_GDN_TIMELINE=ON); others say so
grep -q "DELTATRON_GDN_TIMELINE:BOOL=ON" "$(dirname "$bin")/../CMakeCache.txt" 2> /dev/null ||
  expect_refused "DELTATRON_GDN_TIMELINE=ON" --timeline /tmp/bench_gdn_timeline.csv
expect_refused "--iters" --iters 0
expect_refused "--warmup" --warmup -1
expect_refused "--impl" --impl fast
expect_refused "--digest" --digest=maybe
for bad in "16,1024,12" "16,1024,12,64x" "16,0,12,64" "a,b,c,d" "16,1024,12,64;4,4096"; do
  expect_refused "is not B,T,H,D" --shapes "$bad"
done
expect_refused "--shapes is empty" --shapes ""
echo "bench_gdn: bad options refused"

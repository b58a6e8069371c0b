# Sourced by the tests of tools/dev's scripts: repo (the repository root), tmp (a directory removed
# at exit), fail MESSAGE, and expect_error "message part" SCRIPT ARGS... (tools/dev/SCRIPT run by
# python3 must fail and print the message part on stderr).
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "$*"; exit 1; }
expect_error() {
  local want=$1
  shift
  if python3 "$repo/tools/dev/$@" > /dev/null 2> "$tmp/err"; then fail "$*: expected failure"; fi
  grep -q -- "$want" "$tmp/err" || { echo "$*: wrong message (want '$want'):"; cat "$tmp/err"; exit 1; }
}

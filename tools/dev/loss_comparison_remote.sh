#!/usr/bin/env bash
# One sitting of scripts/loss_comparison.sh on a GPU host that receives a copy of the working tree
# with these carried files: .xfer/bin.tar.xz (deltatron and the shared libraries the host lacks, from
# tools/dev/pack_binaries.sh) and .xfer/corpus_text.tar.xz (scripts/build_corpus.py's bundle), and
# .xfer/commit (pack_binaries.sh's record of the commit, exported as DELTATRON_COMMIT so that the runs
# record it rather than the copy's possibly stale .git).
# The shards are made on the host; the run directories, without checkpoints, come back as
# $OUT/results.tar.gz. Arguments go to loss_comparison.sh.
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=/tmp/xbin
mkdir -p "$bin" && tar -xJf .xfer/bin.tar.xz -C "$bin" || exit 1
export LD_LIBRARY_PATH=$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [[ -s .xfer/commit ]]; then
  DELTATRON_COMMIT=$(< .xfer/commit)
  export DELTATRON_COMMIT
else
  echo "warning: no .xfer/commit (tools/dev/pack_binaries.sh writes it); the runs record this copy's git HEAD" >&2
fi
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
if [[ ! -f shards/comparison/docs_val_000000.bin ]]; then
  bash scripts/prepare_comparison_data.sh .xfer/corpus_text.tar.xz shards/comparison "$bin/deltatron" 2>&1 | tail -8 || exit 1
fi
manifest=/tmp/corpus_MANIFEST.json
tar -xJOf .xfer/corpus_text.tar.xz --wildcards '*MANIFEST.json' > "$manifest" || manifest=
# Finished runs from earlier machines (without checkpoints) are skipped: those carried back in
# .xfer/results.tar.gz, else the records committed in docs/experiments/loss_comparison_runs.
if [[ ! -d runs/loss_comparison ]]; then
  mkdir -p runs
  if [[ -f .xfer/results.tar.gz ]]; then
    tar -xzf .xfer/results.tar.gz -C runs
  elif [[ -d docs/experiments/loss_comparison_runs ]]; then
    cp -r docs/experiments/loss_comparison_runs runs/loss_comparison
  fi
fi
# LIMIT_S (default 570): the sitting is cut there, so that the results are packed inside a 600 s call.
PYTHONUNBUFFERED=1 timeout "${LIMIT_S:-570}" bash scripts/loss_comparison.sh --deltatron "$bin/deltatron" ${manifest:+--corpus-manifest "$manifest"} \
  --out runs/loss_comparison "$@"
rc=$?
[[ -d runs/loss_comparison ]] && tar -czf "${OUT:-/tmp}/results.tar.gz" --exclude=checkpoints -C runs loss_comparison
exit $rc

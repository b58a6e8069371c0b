#!/usr/bin/env bash
# Launches Deltatron ranks with mpirun, on one node or several, and prints the command it runs.
#
#   scripts/launch.sh [options] -- COMMAND [ARGS...]
#
#   -n, --np N          total ranks (default: ranks per node x hosts in the hostfile, or ranks per node)
#   -H, --hostfile F    one host per line, Open MPI style: "node1 slots=8" (MPICH: "node1:8");
#                       omit to run on this node only
#   -p, --per-node K    ranks per node (default: the GPUs `nvidia-smi -L` lists here; without GPUs,
#                       all -n ranks on this node, or 1 with a hostfile); each rank takes the GPU of
#                       its node-local rank
#   -i, --ifname IF     network interface for NCCL's sockets and MPI's TCP traffic (eth0, ens5, ib0);
#                       sets NCCL_SOCKET_IFNAME and Open MPI's btl/oob_tcp_if_include
#       --ib-hca LIST   InfiniBand adapters for NCCL (NCCL_IB_HCA, e.g. mlx5_0,mlx5_1 or =mlx5_0:1)
#       --debug         NCCL_DEBUG=INFO (NCCL's topology and transport choices in the log)
#       --dry-run       print the command and exit
#   -h, --help
#
# Examples:
#   scripts/launch.sh -n 8 -- build/deltatron train --config configs/qwen35_small.yaml
#   scripts/launch.sh -H hosts.txt -p 8 -i ib0 --ib-hca mlx5 -- build/deltatron train --config c.yaml
#   scripts/launch.sh -n 4 --dry-run -- build/deltatron train --config c.yaml --set parallel.tp=2
#
# How the ranks find each other: mpirun starts them; rank 0 creates NCCL's unique id and broadcasts
# it over MPI (docs/parallel.md, "Launching"), so no MASTER_ADDR / MASTER_PORT / rendezvous file is needed.
# World = tp x dp with TP ranks adjacent: with `--map-by ppr:K:node` (what this script asks for) and
# tp <= K, a TP group never leaves a node, and only DP traffic crosses the network.
#
# Environment passed on to every rank (when set here): NCCL_* (e.g. NCCL_SOCKET_IFNAME, NCCL_IB_HCA,
# NCCL_IB_DISABLE, NCCL_NET_GDR_LEVEL, NCCL_ALGO, NCCL_PROTO, NCCL_DEBUG), CUDA_VISIBLE_DEVICES,
# CUDA_DEVICE_MAX_CONNECTIONS, OMP_NUM_THREADS, UCX_*, PATH, LD_LIBRARY_PATH. Open MPI's own
# settings can also come as OMPI_MCA_* variables (e.g. OMPI_MCA_btl_tcp_if_include=eth0).
# Every host needs the same build at the same path (a shared file system or a copy).
# SIGTERM, SIGINT (Ctrl-C) or SIGUSR1 to this script stops a training run cleanly: every rank
# finishes its step and a checkpoint is saved (docs/operations.md, "Stopping on a signal").
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

np="" hostfile="" per_node="" ifname="" ib_hca="" debug=0 dry_run=0
while (($#)); do
  case $1 in
    -n|--np) np=$2; shift 2 ;;
    -H|--hostfile) hostfile=$2; shift 2 ;;
    -p|--per-node) per_node=$2; shift 2 ;;
    -i|--ifname) ifname=$2; shift 2 ;;
    --ib-hca) ib_hca=$2; shift 2 ;;
    --debug) debug=1; shift ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) echo "launch: unknown option '$1' (the command goes after --; see --help)" >&2; exit 2 ;;
  esac
done
if (($# == 0)); then
  echo "launch: no command given; usage: scripts/launch.sh [options] -- COMMAND [ARGS...] (see --help)" >&2
  exit 2
fi
mpirun=${MPIRUN:-mpirun}
if ! command -v "$mpirun" >/dev/null 2>&1; then
  echo "launch: '$mpirun' not found; install openmpi-bin (scripts/install_deps.sh) or set MPIRUN" >&2
  exit 2
fi
if [[ -n $hostfile && ! -r $hostfile ]]; then
  echo "launch: hostfile '$hostfile' cannot be read" >&2
  exit 2
fi

if [[ -z $per_node ]]; then
  per_node=1
  gpus=0
  if command -v nvidia-smi >/dev/null 2>&1; then gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true); fi
  if ((gpus > 0)); then
    per_node=$gpus
  elif [[ -z $hostfile && -n $np ]]; then
    per_node=$np  # CPU ranks on this node only
  fi
fi
if [[ -z $np ]]; then
  hosts=1
  [[ -n $hostfile ]] && hosts=$(grep -cvE '^\s*(#|$)' "$hostfile")
  np=$((per_node * hosts))
fi
if ! [[ $np =~ ^[1-9][0-9]*$ && $per_node =~ ^[1-9][0-9]*$ ]]; then
  echo "launch: -n and -p take positive integers (got np=$np, per-node=$per_node)" >&2
  exit 2
fi

[[ -n $ifname ]] && export NCCL_SOCKET_IFNAME=$ifname
[[ -n $ib_hca ]] && export NCCL_IB_HCA=$ib_hca
((debug)) && export NCCL_DEBUG=INFO

# The variables each rank needs from here.
pass=()
while IFS='=' read -r name _; do
  case $name in
    NCCL_*|UCX_*|CUDA_VISIBLE_DEVICES|CUDA_DEVICE_MAX_CONNECTIONS|OMP_NUM_THREADS|PATH|LD_LIBRARY_PATH) pass+=("$name") ;;
  esac
done < <(env)

cmd=("$mpirun" -np "$np")
if "$mpirun" --version 2>&1 | grep -qiE "open mpi|openrte|open-mpi"; then
  [[ -n $hostfile ]] && cmd+=(--hostfile "$hostfile")
  # ppr: K ranks per node, filled node by node (so TP groups, adjacent ranks, stay in a node);
  # no binding: the ranks' OpenMP threads (CPU references, data loading) may use the node's cores.
  cmd+=(--map-by "ppr:${per_node}:node" --bind-to none)
  [[ -n $ifname ]] && cmd+=(--mca btl_tcp_if_include "$ifname" --mca oob_tcp_if_include "$ifname")
  [[ $(id -u) -eq 0 ]] && cmd+=(--allow-run-as-root)
  for v in "${pass[@]}"; do cmd+=(-x "$v"); done
else  # MPICH / Intel MPI (Hydra)
  [[ -n $hostfile ]] && cmd+=(-f "$hostfile")
  cmd+=(-ppn "$per_node")
  [[ -n $ifname ]] && cmd+=(-iface "$ifname")
  ((${#pass[@]})) && cmd+=(-genvlist "$(IFS=,; echo "${pass[*]}")")
fi
cmd+=("$@")

printf 'launch:' >&2
printf ' %q' "${cmd[@]}" >&2
printf '\n' >&2
((dry_run)) && exit 0

# Stopping: mpirun answers SIGTERM and SIGINT by killing the ranks a second later, before they can
# save, but forwards SIGUSR1 to every rank unchanged. So this script turns a stop request (SIGTERM
# from a scheduler, SIGINT from Ctrl-C, or SIGUSR1) into SIGUSR1 for mpirun: every rank finishes its
# step, rank 0 saves a checkpoint, and the job exits 0 (docs/operations.md). A second request sends
# SIGTERM: mpirun ends the ranks at once, without a checkpoint. mpirun runs in a session of its own,
# so that Ctrl-C at the terminal reaches this script only; its exit status is this script's.
setsid "${cmd[@]}" 0<&0 &
child=$!
requests=0
stop() {
  requests=$((requests + 1))
  if ((requests == 1)); then
    echo "launch: $1 received: asking the ranks to stop after their step and save a checkpoint (SIGUSR1 to mpirun); send it again to stop at once" >&2
    kill -USR1 "$child" 2>/dev/null || true
  else
    echo "launch: $1 received again: stopping now, without a checkpoint (SIGTERM to mpirun)" >&2
    kill -TERM "$child" 2>/dev/null || true
  fi
}
trap 'stop SIGTERM' TERM
trap 'stop SIGINT' INT
trap 'stop SIGUSR1' USR1
# A trapped signal interrupts `wait`: wait again until mpirun has ended, for its own exit status.
while :; do
  status=0
  wait "$child" || status=$?
  kill -0 "$child" 2>/dev/null || break
done
exit "$status"

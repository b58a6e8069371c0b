#!/bin/bash
# CPU emulation of the GDN CUDA kernels: every kernels/cuda/gdn_*.cu compiled by g++ against the
# shims in include/ (one std::thread per CUDA thread, one block at a time, std::barrier for
# __syncthreads and for the warp-collective instructions, the documented mma.sync / ldmatrix
# fragment layouts, cp.async deferred to its wait with the destination poisoned meanwhile, device
# memory and shared memory poisoned with NaN), then checked against the double CPU references
# (main.cpp). Slow (minutes for the larger cases) and blind to timing and to races the barriers
# hide, but it runs the real kernel code on any machine: every tensor-core kernel passed here
# before its first GPU run, and passed there too.
#   kernels/cuda/gdn_emu/build.sh            -> build-gdnemu/emu_gdn
#   build-gdnemu/emu_gdn quick|lengths|d128|wide|cols|misc|long|dims|pointwise|norm|conv|colwarp|fused|persist [simt]
# (norm: the gated norm at sizes where its one-wave backward variant takes several steps per CTA; slow.)
# (dims: head dims 8 to 64, dk != dv, through kAuto, which must pick the SIMT kernels.)
# CMake builds the same thing as the target emu_gdn (kernels/cuda/gdn_emu/CMakeLists.txt) and ctest runs
# it (label emu); this script is the quick way by hand.
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$HERE/../../.." && pwd)
B=${EMU_BUILD:-$R/build-gdnemu}  # EMU_BUILD: another build directory
mkdir -p "$B/src" "$B/obj"
for f in gdn_chunk gdn_tc_forward gdn_tc_backward gdn_tc_grad gdn_tc_launch gdn_norm gdn_pointwise gdn_recurrent gdn_conv gdn_tc_state_cw; do
  python3 "$HERE/gen.py" "$R/kernels/cuda/$f.cu" "$B/src/$f.cpp"   # <<<grid, block, smem, stream>>> -> emu::launch
done
FLAGS="-std=c++20 -O2 -g -pthread -Wno-unknown-pragmas -I $HERE/include -I $R"
pids=()
for f in "$B"/src/*.cpp "$R/kernels/cuda/gdn_plan.cpp" "$HERE/emu.cpp" "$HERE/main.cpp"; do
  g++ $FLAGS -c "$f" -o "$B/obj/$(basename "$f" .cpp).o" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
g++ -pthread "$B"/obj/*.o -lfmt -o "$B/emu_gdn"
echo "built $B/emu_gdn"

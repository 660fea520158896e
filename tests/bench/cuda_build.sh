#!/usr/bin/env bash
# Builds the release `raspc` binary with `--features cuda`, with nvcc and the CUDA headers taken
# from NVIDIA's PyPI wheels (no system CUDA toolkit needed).
#   bash tests/bench/cuda_build.sh            # -> $CARGO_TARGET_DIR/release/raspc (cuda build)
# Environment: CUDA_COMPUTE_CAP (default 90, an H100/H200; candle's kernel build needs it when no
# GPU is visible), CARGO_TARGET_DIR (default: target-cuda next to the default target dir, so the
# CPU build is not rebuilt). The GPU driver library is loaded at run time (cudarc), so the binary
# builds on a machine without a GPU and runs where one is present: `raspc ... --device cuda`.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target/cuda}"
venv="$CARGO_TARGET_DIR/venv-cuda"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
# One CUDA release line for every wheel: nvcc, its front end pieces, headers, runtime and NVRTC.
cuda="13.0.*"
# cuBLAS and cuRAND number their own releases: 13.0.x and 10.4.0.x are CUDA 13.0's.
"$venv/bin/pip" install -q "nvidia-cuda-nvcc==$cuda" "nvidia-cuda-crt==$cuda" "nvidia-nvvm==$cuda" \
  "nvidia-cuda-runtime==$cuda" "nvidia-cuda-cccl==$cuda" "nvidia-cuda-nvrtc==$cuda" \
  "nvidia-cublas==13.0.*" "nvidia-curand==10.4.0.*"
cuda_root="$("$venv/bin/python" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))')"
[ -x "$cuda_root/bin/nvcc" ] || { echo "error: no nvcc under $cuda_root" >&2; exit 1; }
export CUDA_ROOT="$cuda_root" CUDA_PATH="$cuda_root" CUDA_HOME="$cuda_root"
export PATH="$cuda_root/bin:$PATH"
export CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}"
# nvcc looks for the CCCL headers (cub, thrust, cuda/std) under include/cccl in the wheel layout.
export NVCC_APPEND_FLAGS="${NVCC_APPEND_FLAGS:-} -I$cuda_root/include/cccl"
nvcc --version | tail -2
# candle links cudarc with `dynamic-linking`: the linker wants libcuda (the driver, not on PyPI),
# cuBLAS, cuRAND, cudart and NVRTC as unversioned .so files. The wheels ship versioned ones, so a
# link directory gets symlinks to them, plus a link-time stub of the driver: every function cuda.h
# declares, with the driver's soname, so the binary loads the machine's real libcuda.so.1 at run time.
links="$CARGO_TARGET_DIR/cuda-link"
mkdir -p "$links"
for lib in cublas cublasLt curand cudart nvrtc; do
  so="$(ls "$cuda_root/lib/lib$lib.so."* | grep -E "lib$lib\.so\.[0-9]+$" | head -1)"
  ln -sf "$so" "$links/lib$lib.so"
done
gcc -E -P -I"$cuda_root/include" "$cuda_root/include/cuda.h" \
  | "$venv/bin/python" -c 'import re, sys
names = sorted(set(re.findall(r"\bCUresult\s+(cu[A-Za-z0-9_]+)\s*\(", sys.stdin.read())))
print("".join(f"int {n}(void) {{ return 999; }}\n" for n in names))' > "$links/libcuda_stub.c"
gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$links/libcuda.so" "$links/libcuda_stub.c"
# The same stub as libcuda.so.1, alone in its own folder: on a machine without a GPU driver the
# binary starts (for CPU commands) with that folder on LD_LIBRARY_PATH. Never where a driver is.
mkdir -p "$CARGO_TARGET_DIR/cuda-stub"
ln -sf ../cuda-link/libcuda.so "$CARGO_TARGET_DIR/cuda-stub/libcuda.so.1"
# gcc, the linker driver, searches LIBRARY_PATH for -l (RUSTFLAGS would rebuild every crate).
export LIBRARY_PATH="$links${LIBRARY_PATH:+:$LIBRARY_PATH}"
cd "$root"
cargo build --release --locked -p raspc --features cuda
echo "built: $CARGO_TARGET_DIR/release/raspc (CUDA compute capability $CUDA_COMPUTE_CAP)"
echo "run it where a GPU is, with the CUDA 13 libraries on the loader path, e.g."
echo "  LD_LIBRARY_PATH=$cuda_root/lib $CARGO_TARGET_DIR/release/raspc run MODEL --input ... --device cuda (or simulate ... --device cuda)"
echo "or check it against the CPU there: bash tests/bench/cuda_check.sh $CARGO_TARGET_DIR/release/raspc"
echo "(without a GPU driver, CPU commands only: LD_LIBRARY_PATH=$CARGO_TARGET_DIR/cuda-stub:$cuda_root/lib)"

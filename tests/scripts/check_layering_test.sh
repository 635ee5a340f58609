#!/usr/bin/env bash
# scripts/check_layering.py: passes on the tree as it is, and fails, naming the file, line and both
# layers, on an include planted upward (runtime/ -> stages/) and sideways (kernels/ -> runtime/model/).
set -euo pipefail
src="$1"
check="$src/scripts/check_layering.py"

python3 "$check" "$src"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
plant() {  # plant FILE INCLUDE: a copy of the tree's table plus one file holding INCLUDE
  rm -rf "$tmp/t" && mkdir -p "$tmp/t/docs" "$tmp/t/$(dirname "$1")"
  cp "$src/docs/architecture.md" "$tmp/t/docs/"
  printf '#pragma once\n#include "runtime/core/error.h"\n#include "%s"\n' "$2" >"$tmp/t/$1"
}
expect_failure() {  # expect_failure WANTED_LINE
  if python3 "$check" "$tmp/t" >"$tmp/out" 2>&1; then
    echo "FAIL: check_layering passed on a planted include"; cat "$tmp/out"; exit 1
  fi
  grep -qF "$1" "$tmp/out" || { echo "FAIL: expected '$1' in:"; cat "$tmp/out"; exit 1; }
}

plant runtime/model/planted.h stages/pipeline_stage.h
expect_failure "runtime/model/planted.h:3: #include \"stages/pipeline_stage.h\": layer 'model' includes layer 'stages'"
plant runtime/batch/planted.cpp launch/command.h
expect_failure "runtime/batch/planted.cpp:3: #include \"launch/command.h\": layer 'batch' includes layer 'launch'"
plant kernels/cuda/planted.cu runtime/model/spec.h
expect_failure "kernels/cuda/planted.cu:3: #include \"runtime/model/spec.h\": layer 'kernels' includes layer 'model'"
plant runtime/dist/planted.h runtime/config/config.h
expect_failure "layer 'dist' includes layer 'config'"
echo "check_layering: passes on the tree, fails on 4 planted includes"

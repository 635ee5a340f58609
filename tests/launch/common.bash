# Sourced by the CLI tests (not a test itself: ctest runs tests/launch/*.sh). Sets `here`, `data` and
# `gguf`, the real SmolLM2 test model, and fails (never skips) when the model is missing.
here="$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)"
data="$here/../data"
gguf="${CONVEYOR_TEST_MODEL:-${CONVEYOR_CACHE:-$HOME/.cache/conveyor}/SmolLM2-135M-Instruct.Q4_1.gguf}"
if [[ ! -s "$gguf" ]]; then
  echo "FAIL: test model '$gguf' is missing: run scripts/fetch_test_model.sh (or set CONVEYOR_TEST_MODEL)"
  exit 1
fi

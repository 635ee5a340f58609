# Sourced by the GPU script tests (names with _gpu): without a visible GPU they are not run (exit 77),
# and fail when CONVEYOR_REQUIRE_GPU=1.
if ! nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then
  if [ "${CONVEYOR_REQUIRE_GPU:-0}" = 1 ]; then echo "FAIL: CONVEYOR_REQUIRE_GPU=1 but no GPU is visible"; exit 1; fi
  echo "not run: no GPU visible"
  exit 77
fi

#!/usr/bin/env bash
# The one gpu-labelled test of a build configured with -DCONVEYOR_WITH_CUDA=OFF, so that
# `ctest -L gpu` never reports "No tests were found" as success: like every GPU test with no GPU it
# fails under CONVEYOR_REQUIRE_GPU=1 and is skipped (exit 77) otherwise.
msg="this build has no CUDA (configured with -DCONVEYOR_WITH_CUDA=OFF), so no GPU test was built; reconfigure with -DCONVEYOR_WITH_CUDA=ON"
if [ "${CONVEYOR_REQUIRE_GPU:-}" = "1" ]; then
  echo "FAIL: CONVEYOR_REQUIRE_GPU=1 but $msg" >&2
  exit 1
fi
echo "not run: $msg (set CONVEYOR_REQUIRE_GPU=1 to fail instead)" >&2
exit 77

#!/usr/bin/env bash
# Installs everything conveyor needs to build and test on Debian 12 / Ubuntu (apt-get), plus the
# Python packages the test-data scripts use. CUDA is optional: it is used when nvcc is found.
set -euo pipefail
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential cmake ninja-build ccache pkg-config git ca-certificates \
  libopenmpi-dev openmpi-bin libyaml-cpp-dev libboost-program-options-dev nlohmann-json3-dev \
  libgtest-dev libgmock-dev libbenchmark-dev libpcre2-dev libspdlog-dev libfmt-dev libssl-dev libxxhash-dev \
  clang libclang-rt-dev python3 python3-pip >/dev/null

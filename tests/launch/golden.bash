# Sourced by the CLI tests that drive the 5-layer golden llama_deep (not a test itself: ctest runs
# tests/launch/*.sh). Sets bin (the conveyor executable, the script's $1), here, model, configs, tmp (a
# scratch folder removed on exit), fail=0, and mpi (mpirun as the multi-rank tests call it).
set -u
bin=$1
here="$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)"
model="$here/../data/goldens/llama_deep"
configs="$here/../../configs/models"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
mpi="mpirun --oversubscribe -x OMPI_MCA_btl_vader_single_copy_mechanism=none"

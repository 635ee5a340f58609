#!/usr/bin/env bash
# What a batch user expects from vLLM's run-batch and the OpenAI Batch API, end to end on the real
# SmolLM2 GGUF: no max_tokens runs past 16 tokens to EOS or the context; a max_tokens over the context is
# an error line naming both numbers; unimplemented fields fail their line, harmless ones are listed as
# ignored; a model the job does not serve fails like vLLM; an invalid UTF-8 line keeps its custom_id;
# --chat gives the same prompt ids as a batch chat request; bad paths and flag mixes are refused by name.
set -u
bin=$1
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
flags=(--num-gpu-blocks-override 64 --max-model-len 48)
python3 - "$tmp/in.jsonl" <<'PY'
import json, sys
def line(cid, body, url="/v1/completions"):
    return json.dumps({"custom_id": cid, "method": "POST", "url": url, "body": body})
rows = [
    line("long", {"prompt": "Once upon a time, in a small village by the sea,", "temperature": 0}),
    line("big", {"prompt": "Hello", "max_tokens": 1000}),
    line("strm", {"prompt": "Hello", "max_tokens": 2, "stream": True}),
    line("tools", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
                   "tools": [{"type": "function", "function": {"name": "f"}}]}, "/v1/chat/completions"),
    line("n2", {"prompt": "Hello", "max_tokens": 2, "n": 2}),
    line("fmt", {"prompt": "Hello", "max_tokens": 2, "response_format": {"type": "json_object"}}),
    line("meta", {"prompt": "Hello", "max_tokens": 2, "temperature": 0, "user": "u1", "metadata": {"k": "v"},
                  "stream": False}),
    line("gpt9", {"model": "gpt-9", "prompt": "Hello", "max_tokens": 2}),
    line("smol", {"model": "smol", "prompt": "Hello", "max_tokens": 2, "temperature": 0}),
    line("chat", {"messages": [{"role": "user", "content": "Name a color."}], "max_tokens": 8, "temperature": 0},
         "/v1/chat/completions"),
]
with open(sys.argv[1], "wb") as f:
    for r in rows:
        f.write(r.encode() + b"\n")
    f.write(b'{"custom_id": "utf", "method": "POST", "url": "/v1/completions", "body": {"prompt": "caf\xc3\x28"}}\n')
PY
timeout 600 "$bin" generate --model "$gguf" --input "$tmp/in.jsonl" --output "$tmp/out.jsonl" "${flags[@]}" \
  --served-model-name smol --summary "$tmp/summary.json" 2>"$tmp/err"
rc=$?
if [[ $rc != 0 ]]; then echo "FAIL: batch run exited $rc"; cat "$tmp/err"; exit 1; fi
grep -q "ignored request fields (no effect here): metadata (1 request), user (1 request)" "$tmp/err" ||
  { echo "FAIL: the ignored fields are not in the run summary:"; cat "$tmp/err"; fail=1; }
python3 - "$tmp" <<'PY' || fail=1
import json, sys
d = sys.argv[1]
out = {o["custom_id"]: o["response"]["body"] for o in map(json.loads, open(d + "/out.jsonl"))}
errs = {e["custom_id"]: e["response"]["body"]["error"]["message"] for e in map(json.loads, open(d + "/out.jsonl.errors.jsonl"))}
assert sorted(out) == ["chat", "long", "meta", "smol"], sorted(out)
long = out["long"]
u, reason = long["usage"], long["choices"][0]["finish_reason"]
# No max_tokens: past vLLM's old 16, to EOS (stop) or the 48-token context (length), never 16 exactly.
assert u["completion_tokens"] > 16, long
assert reason == "stop" or u["prompt_tokens"] + u["completion_tokens"] == 48, long
assert out["smol"]["model"] == "smol", out["smol"]
want = {
    "big": ["max_tokens is 1000", "max_model_len is 48"],
    "strm": ["'stream' is not supported"],
    "tools": ["'tools' is not supported"],
    "n2": ["n must be 1"],
    "fmt": ["'response_format' is not supported"],
    "gpt9": ["The model `gpt-9` does not exist."],
    "utf": ["not valid UTF-8"],
}
assert sorted(errs) == sorted(want), sorted(errs)
for cid, needles in want.items():
    for n in needles:
        assert n in errs[cid], (cid, n, errs[cid])
s = json.load(open(d + "/summary.json"))
assert s["ignored_fields"] == {"metadata": 1, "user": 1}, s
print("batch requests: results, error lines and ignored fields as expected; 'long' gave",
      u["completion_tokens"], "tokens,", reason)
PY
# --chat renders like a batch chat request: same prompt token count, same greedy text.
text=$(timeout 300 "$bin" generate --model "$gguf" --chat --prompt "Name a color." --temperature 0 --max-tokens 8 \
  "${flags[@]}" 2>"$tmp/chat.err")
python3 - "$tmp" "$text" <<'PY' || fail=1
import json, re, sys
d, text = sys.argv[1], sys.argv[2]
m = re.search(r"generate: (\d+) prompt \+", open(d + "/chat.err").read())
assert m, open(d + "/chat.err").read()
chat = [json.loads(l) for l in open(d + "/out.jsonl") if json.loads(l)["custom_id"] == "chat"][0]["response"]["body"]
assert int(m.group(1)) == chat["usage"]["prompt_tokens"], (m.group(1), chat["usage"])
assert text.strip() == chat["choices"][0]["message"]["content"].strip(), (text, chat)
print("--chat and the batch chat request: both", m.group(1), "prompt tokens, text", repr(text))
PY

# expect <status> <needle>... -- <command>: the exit status and every needle in its stderr, never "internal".
expect() {
  local want=$1; shift
  local needles=()
  while [[ $1 != -- ]]; do needles+=("$1"); shift; done
  shift
  local err rc
  err=$("$@" 2>&1 >/dev/null); rc=$?
  if [[ $rc != "$want" ]]; then echo "FAIL: '$*' exited $rc (wanted $want): $err"; fail=1; fi
  for n in "${needles[@]}"; do
    if [[ "$err" != *"$n"* ]]; then echo "FAIL: wanted '$n' from '$*', got: $err"; fail=1; fi
  done
  if [[ "$err" == *"internal error"* || "$err" == *"check failed"* ]]; then echo "FAIL: '$*' said: $err"; fail=1; fi
}
: > "$tmp/empty.jsonl"
expect 0 "0 requests" -- "$bin" generate --model "$gguf" --input "$tmp/empty.jsonl" --output "$tmp/e.jsonl" "${flags[@]}"
expect 1 "--input runs a batch file" -- "$bin" generate --model "$gguf" --prompt hi --input "$tmp/in.jsonl" \
  --output "$tmp/p.jsonl"
mkdir "$tmp/outdir"
expect 1 "the output '$tmp/outdir' is a directory" -- "$bin" generate --model "$gguf" --input "$tmp/in.jsonl" \
  --output "$tmp/outdir"
expect 1 "the batch input '$tmp' is a directory" -- "$bin" generate --model "$gguf" --input "$tmp" --output "$tmp/d.jsonl"
touch "$tmp/afile"
expect 1 "$tmp/afile/model" "does not exist" -- "$bin" generate --model "$tmp/afile/model" --prompt-ids 1,2
exit $fail

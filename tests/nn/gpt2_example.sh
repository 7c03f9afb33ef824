#!/bin/sh
# gpt2_example.sh GPT2 - runs examples/gpt2 (the binary GPT2) at a tiny config
# on Debian's fortunes: 30 AdamW steps must bring the validation loss well
# under the first step's loss (about ln 256 = 5.55), and the weights it saves
# must, loaded by a second run that does not train, sample the same text
# from the same seed. Exits 77 (ctest: skipped) without the fortunes.
set -eu
gpt2=$1
data=/usr/share/games/fortunes
if [ ! -d "$data" ]; then
    echo "skipped: no $data (apt-get install fortunes)"
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tc_gpt2_XXXXXX")
trap 'rm -rf "$tmp"' EXIT
shape="--layers 2 --heads 2 --width 64 --context 64 --seed 5 --sample 60 --temperature 0.8"
# shellcheck disable=SC2086 # $shape is a list of arguments
"$gpt2" $shape --seq 32 --batch 8 --steps 30 --lr 3e-3 --val-every 30 --val-batches 4 \
    --save "$tmp/w.safetensors" > "$tmp/train.txt"
# shellcheck disable=SC2086
"$gpt2" $shape --steps 0 --load "$tmp/w.safetensors" > "$tmp/load.txt"
cat "$tmp/train.txt"
first=$(awk '$1 == "step" && $2 == "1/30" && $3 == "loss" { print $4 }' "$tmp/train.txt")
val=$(awk '$1 == "step" && $3 == "val" { v = $5 } END { print v }' "$tmp/train.txt")
echo "first step loss $first, validation loss after 30 steps $val"
awk -v f="$first" -v v="$val" 'BEGIN { exit !(f > 5.0 && f < 6.0 && v < 0.75 * f) }' || {
    echo "FAIL: the loss did not drop"
    exit 1
}
sample() { sed -n '/^---- 60 tokens/,/^---- generated/p' "$1" | sed '$d'; }
if [ "$(sample "$tmp/train.txt")" != "$(sample "$tmp/load.txt")" ] || [ -z "$(sample "$tmp/load.txt")" ]; then
    echo "FAIL: the loaded weights sampled other text:"
    cat "$tmp/load.txt"
    exit 1
fi
echo "ok: the loaded weights sample the same text"

#!/bin/sh
# Writes the hostile-input corpus (files and cases.tsv) into $1, running the suite's own generator.
set -e
out=${1:?usage: tools/hostile/generate.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../.."
TPUSIM_HOSTILE_KEEP="$out" cargo test --release -p tpusim --test cli_hostile hostile_inputs_are_refused_cleanly
echo "corpus in $out ($(wc -l < "$out/cases.tsv") cases)"

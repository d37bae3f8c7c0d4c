#!/usr/bin/env bash
# Regenerates the figures in docs/ listed in docs/figures.txt (SVG and PNG) with the release build.
# tests/docs_figures.rs fails when the committed SVGs drift from what these commands draw.
# Usage: tools/regen-docs.sh            (from anywhere in the repository)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
cargo build --release --bin tpusim
bin="$root/target/release/tpusim"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
declare -A done_cmds=()
while IFS='|' read -r name file args; do
    name="$(echo "$name" | xargs)"
    file="$(echo "$file" | xargs)"
    args="$(echo "$args" | xargs)"
    [[ -z "$name" || "$name" == \#* ]] && continue
    args="${args//\$OUT/$out}"
    if [[ -z "${done_cmds[$args]:-}" ]]; then
        echo "tpusim $args"
        # shellcheck disable=SC2086
        "$bin" $args >/dev/null
        done_cmds[$args]=1
    fi
    cp "$out/$file" "docs/$name.svg"
    cp "$out/${file%.svg}.png" "docs/$name.png"
    echo "  -> docs/$name.svg, docs/$name.png"
done < docs/figures.txt

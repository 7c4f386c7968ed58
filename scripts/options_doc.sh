#!/usr/bin/env bash
# Writes the option tables of docs/options.md from the commands' own option tables (what
# `degnn COMMAND --help` prints): each block between `<!-- options: degnn COMMAND -->` and
# `<!-- end options -->` becomes `degnn COMMAND --help-markdown`. With --check it changes nothing
# and ends non-zero when a block differs (the test OptionsDoc.* runs the same comparison).
# Usage: scripts/options_doc.sh [--check]    (DEGNN=path/to/degnn, default build/runtime/degnn)
set -euo pipefail
cd "$(dirname "$0")/.."
degnn=${DEGNN:-build/runtime/degnn}
doc=docs/options.md
out=$(mktemp)
trap 'rm -f "$out"' EXIT
command=""
while IFS= read -r line; do
  if [[ $line =~ ^'<!-- options: degnn '(.*)' -->'$ ]]; then
    command=${BASH_REMATCH[1]}
    printf '%s\n' "$line" >>"$out"
    # shellcheck disable=SC2086
    "$degnn" $command --help-markdown >>"$out"
  elif [ "$line" = "<!-- end options -->" ]; then
    command=""
    printf '%s\n' "$line" >>"$out"
  elif [ -z "$command" ]; then
    printf '%s\n' "$line" >>"$out"
  fi
done <"$doc"
if [ "${1:-}" = --check ]; then
  diff -u "$doc" "$out" && echo "options_doc: $doc matches the commands' options"
else
  cp "$out" "$doc"
  echo "options_doc: wrote $doc"
fi

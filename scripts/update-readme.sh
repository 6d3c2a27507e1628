#!/usr/bin/env bash
# Regenerates the README's validation tables (between the <!-- validate:NAME --> markers)
# from `madmax validate --markdown`. tests/check_cli.c fails when they are stale.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${MADMAX:-build/madmax}
for name in training llama3 fp8 nemo torchtitan inference collectives overlap; do
  "$bin" validate "configs/validation/$name.json" --markdown > "README.md.$name"
  awk -v name="$name" -v file="README.md.$name" '
    $0 == "<!-- validate:" name " -->" { print; while ((getline line < file) > 0) print line; skip = 1; next }
    $0 == "<!-- /validate:" name " -->" { skip = 0 }
    !skip { print }' README.md > README.md.new
  mv README.md.new README.md
  rm -f "README.md.$name"
done
echo "README tables updated"

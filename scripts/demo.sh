#!/usr/bin/env bash
# The main job on its embedded defaults: set up .venv if needed, run the reference agent on the
# chemistry demo task with the shipped replay recording against the live tools, then validate and grade.
#   OUT=runs/demo bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
TASK=environment/demo_tasks/aromatic-acidity
OUT=${OUT:-runs/demo}
SPU=.venv/bin/spu
rm -rf "$OUT"
set -x
"$SPU" agent run "$TASK/task" --out "$OUT" --model replay:demo-aromatic-acidity
"$SPU" validate "$TASK/task" "$OUT/rankings.json"
"$SPU" grade "$TASK/task" "$OUT/rankings.json" --answers "$TASK/answers.json"
{ set +x; } 2>/dev/null
echo "demo: look at the run with: $SPU view $OUT   (or: $SPU view $OUT --out $OUT.html)"

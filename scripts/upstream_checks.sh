#!/usr/bin/env bash
# The upstream-ready reports' scripts (docs/upstream/*.py), each run twice in the adapter venv that
# `scripts/python_tests.sh --full` builds (build-venv/, with the libraries the adapters drive): as is it must exit
# 1 (the bug, on the pinned release; its last line starts "FAIL") and with --with-fix 0 (the fix or workaround
# applied; "OK"). Exit 77 both ways ("SKIP") is "skipped": the script needs what this machine lacks (CUDA
# flash-attn, or a library's own environment whose venv is not built); printed as such, never counted as passed.
# A script whose name starts with a family environment's name (verl-, openrlhf-, areal-, llamafactory-: requirements/<family>.lock)
# runs in that venv when it is built (the conformance stage builds it). One line per script; any other outcome
# fails the stage.
#
#   ./scripts/upstream_checks.sh [PYTHON]   PYTHON defaults to build-venv/bin/python
set -euo pipefail
cd "$(dirname "$0")/.."
python=${1:-build-venv/bin/python}
if [[ ! -x $python ]]; then
  echo "upstream_checks.sh: no $python: build the adapter venv first (./scripts/python_tests.sh --full)" >&2
  exit 2
fi
python="$(cd "$(dirname "$python")" && pwd)/$(basename "$python")"  # absolute: the scripts run in docs/upstream/
# run SCRIPT [ARG]: its exit status; $last: the last line it printed on standard output (its verdict; the
# libraries' warnings on standard error are dropped).
run() {
  local out rc=0
  out=$(cd docs/upstream && "$python" "$@" 2>/dev/null) || rc=$?
  last=$(printf '%s\n' "$out" | tail -n 1)
  return "$rc"
}
# The family environments already built (packoracle.conformance._envs; the conformance stage builds them): a
# script named <family>-*.py runs in its family's venv, where its library is installed, instead of skipping.
declare -A family_python=()
while read -r family family_py; do
  [[ -n $family ]] && family_python[$family]=$family_py
done < <("$python" -c '
import os
from packoracle.conformance._envs import FAMILIES, EnvironmentUnavailable, python_of, venv_dir
for name, family in FAMILIES.items():
    try:
        venv = venv_dir(family)
    except EnvironmentUnavailable:
        continue
    if os.path.isfile(os.path.join(venv, "complete")):
        print(name, python_of(venv))
' 2>/dev/null || true)
main_python=$python
passed=0 skipped=0 failed=0
for script in docs/upstream/*.py; do
  name=$(basename "$script")
  python=${family_python[${name%%-*}]:-$main_python}
  where=""
  [[ $python != "$main_python" ]] && where=" (in the ${name%%-*} environment)"
  bug=0 fix=0
  run "$name" || bug=$?
  bug_line=$last
  run "$name" --with-fix || fix=$?
  fix_line=$last
  # The exit status and the verdict line agree (a crash that exits 1 is not the bug reproduced).
  if ((bug == 1 && fix == 0)) && [[ $bug_line == FAIL* && $fix_line == OK* ]]; then
    passed=$((passed + 1))
    echo "upstream_checks.sh: $name: ok$where (exit 1 as released, 0 --with-fix): $bug_line"
  elif ((bug == 77 && fix == 77)) && [[ $bug_line == SKIP* ]]; then
    skipped=$((skipped + 1))
    echo "upstream_checks.sh: $name: SKIPPED (77): ${bug_line#SKIP (77): }"
  else
    failed=$((failed + 1))
    echo "upstream_checks.sh: $name: FAILED: exit $bug as released (want 1): $bug_line; exit $fix --with-fix (want 0): $fix_line"
  fi
done
echo "upstream_checks.sh: $passed ok, $skipped skipped (77), $failed failed"
((failed == 0))

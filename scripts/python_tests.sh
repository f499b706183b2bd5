#!/usr/bin/env bash
# The Python package as a user gets it: `pip install .` of this checkout into a fresh virtual environment
# (build-venv/), with the pinned test dependencies and PyTorch 2.13.0 (CPU), then, in that environment and
# against the installed package (never the source tree), the Python tests (python/tests) with pytest and every
# Python snippet of README.md (scripts/readme_snippets.py). Each stage prints its wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/stage.sh
venv=build-venv
install() {
  rm -rf "$venv"
  python3 -m venv "$venv"
  # torch first and alone: pinned to the CPU build (a later requirement must not pull another torch).
  "$venv/bin/pip" install --quiet torch==2.13.0
  "$venv/bin/pip" install --quiet ".[test]"
}
stage "pip install . (fresh venv)" install
export PACKORACLE_BIN="$PWD/$venv/bin/packoracle"
stage "python tests" "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests
stage "README snippets" "$venv/bin/python" scripts/readme_snippets.py README.md

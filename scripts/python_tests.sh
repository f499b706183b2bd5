#!/usr/bin/env bash
# The Python package as a user gets it: `pip install .` of this checkout into a fresh virtual environment
# (build-venv/), with the pinned test dependencies, the real libraries the adapters drive (the `adapters`
# extra, every version pinned by requirements/adapters.lock) and PyTorch 2.13.0 (CPU), then, in that
# environment and against the installed package (never the source tree): the Python tests (python/tests), the
# adapters' tests against the real libraries (python/tests_adapters), the conformance matrix regenerated and
# compared with the committed one (docs/conformance.md and README.md's table), and every Python snippet of
# README.md and docs/ (scripts/readme_snippets.py). Each stage prints its wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/stage.sh
venv=build-venv
install() {
  rm -rf "$venv"
  echo "python_tests: a fresh virtual environment in $venv/"
  python3 -m venv "$venv"
  echo "python_tests: installing torch 2.13.0 (the CPU wheel)"
  # torch first and alone: pinned to the CPU build (a later requirement must not pull another torch).
  "$venv/bin/pip" install --quiet torch==2.13.0
  echo "python_tests: building packoracle's extension and installing it with the pinned test and adapter libraries (several minutes)"
  "$venv/bin/pip" install --quiet --progress-bar off -c requirements/adapters.lock ".[test,adapters]"
}
stage "pip install . (fresh venv)" install
export PACKORACLE_BIN="$PWD/$venv/bin/packoracle"
stage "python tests" "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests
stage "adapter tests (real libraries)" "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests_adapters
stage "conformance matrix (compared with docs/conformance.md)" \
  "$venv/bin/packoracle" conformance --check docs/conformance.md --readme README.md --readme docs/libraries.md
stage "README and docs snippets" "$venv/bin/python" scripts/readme_snippets.py README.md docs/python.md docs/guard.md docs/libraries.md

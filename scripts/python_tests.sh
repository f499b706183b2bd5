#!/usr/bin/env bash
# The Python package as a user gets it: `pip install .` of this checkout into a fresh virtual environment
# (build-venv/), in its two steps: the wheel built into build-wheel/ and checked to need no library outside
# the manylinux set (scripts/wheel_check.sh), then installed, with PyTorch 2.13.0 (CPU) and the pinned test
# dependencies (every version pinned by requirements/adapters.lock). Then, in that environment and against
# the installed package (never the source tree): mypy on the public API (pyproject.toml's [tool.mypy]; the
# wheel's py.typed and _core.pyi), the Python tests (python/tests) and every Python snippet of
# README.md and docs/ (scripts/readme_snippets.py). With --full (./scripts/test.sh --full, CI) the venv also gets the
# real libraries the adapters drive (the `adapters` extra), the family environments of the libraries that cannot
# share that venv (built once, cached outside the clone), and their tests (python/tests_adapters) and the
# conformance matrix regenerated and compared with the committed one (docs/conformance.md, README.md's and docs/libraries.md's
# tables) run too.
# Each stage prints its wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/stage.sh
full=0
case "${1:-}" in
  --full) full=1 ;;
  "") ;;
  *) echo "usage: $0 [--full]" >&2; exit 2 ;;
esac
extras=test
if ((full)); then extras=test,adapters; fi
venv=build-venv
wheels=build-wheel
fresh_venv() {
  rm -rf "$venv"
  python3 -m venv "$venv"
  # torch first and alone: pinned to the CPU build (a later requirement must not pull another torch).
  "$venv/bin/pip" install --quiet torch==2.13.0
}
# `pip install .` in its two steps, so that the wheel itself is checked between them.
build_wheel() {
  rm -rf "$wheels"
  "$venv/bin/pip" wheel --quiet --no-deps --progress-bar off -w "$wheels" .
}
install_wheel() {
  "$venv/bin/pip" install --quiet --progress-bar off -c requirements/adapters.lock \
    "$(ls "$wheels"/packoracle-*.whl)[$extras]"
}
stage "a fresh venv in $venv/ with torch 2.13.0 (CPU)" fresh_venv
stage "pip wheel . into $wheels/ (the extension built; mostly ccache hits after ./scripts/setup.sh)" build_wheel
stage "the wheel needs only manylinux libraries" ./scripts/wheel_check.sh "$wheels"/packoracle-*.whl
stage "pip install of the wheel with .[$extras], pinned" install_wheel
export PACKORACLE_BIN="$PWD/$venv/bin/packoracle"
# -p packoracle from the repository root finds the installed package (there is no packoracle/ here); its cache
# goes with the venv, built afresh each run.
stage "types (mypy on the public API)" "$venv/bin/python" -m mypy --config-file pyproject.toml \
  --cache-dir "$venv/mypy-cache" -p packoracle
# --durations: the slowest tests of each run in its log, where the stage's time goes (docs/hardening.md).
stage "python tests" "$venv/bin/python" -m pytest -q -p no:cacheprovider --durations=15 python/tests
if ((full)); then
  # The families' own venvs (requirements/<family>.lock: grain, litgpt, verl, openrlhf, areal, fla, axolotl,
  # llamafactory, megatron), built once and then found in ~/.cache/packoracle/envs/ (keyed by each lock; pip's
  # cache keeps the downloads): seconds when cached, the cold cost in docs/hardening.md. The adapter tests and
  # the conformance stage drive their rows there.
  stage "family environments (requirements/<family>.lock, cached in ~/.cache/packoracle/envs)" \
    "$venv/bin/packoracle-conformance" --envs
  stage "adapter tests (real libraries)" "$venv/bin/python" -m pytest -q -p no:cacheprovider --durations=15 \
    python/tests_adapters
  stage "conformance matrix (compared with docs/conformance.md)" \
    "$venv/bin/packoracle" conformance --check docs/conformance.md --readme README.md --readme docs/libraries.md
fi
stage "README and docs snippets" "$venv/bin/python" scripts/readme_snippets.py README.md docs/python.md docs/guard.md docs/libraries.md

#!/usr/bin/env bash
# The main job: set up and build, then show the lesson's worked example and the presets.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh >/dev/null
./build/cli/packoracle lesson
echo
./build/cli/packoracle presets

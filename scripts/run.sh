#!/usr/bin/env bash
# The main job: set up and build, then run the kit against its bundled candidates (packoracle selftest):
# every correct packer must pass, every buggy one must be caught by the invariant its bugzoo entry names.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh >&2  # its progress on stderr: stdout is the selftest's report
./build/cli/packoracle selftest

#!/usr/bin/env bash
# `cmake --build DIR ... 2>&1 | scripts/build_progress.sh NAME`: the build's progress in a few lines.
# Ninja writes one "[k/N] Building ..." line per step when its output is not a terminal (thousands of lines for
# a first build, or none at all when a caller throws them away); this keeps one line per tenth of the steps,
# "NAME: built 120/480 steps (25%), 95 s", and passes every other line (warnings, errors, CMake's messages)
# through unchanged, so a failure still shows in full. The caller's `set -o pipefail` keeps the build's status.
set -uo pipefail
name="${1:-build}"
start=$SECONDS
next=0
while IFS= read -r line; do
  if [[ "$line" =~ ^\[([0-9]+)/([0-9]+)\]\  ]]; then
    done_steps=${BASH_REMATCH[1]}
    total=${BASH_REMATCH[2]}
    percent=$((100 * done_steps / total))
    if ((percent >= next)); then
      echo "$name: built $done_steps/$total steps ($percent%), $((SECONDS - start)) s"
      next=$(((percent / 10 + 1) * 10))
    fi
  elif [[ "$line" != "ninja: no work to do." ]]; then
    printf '%s\n' "$line"
  fi
done
echo "$name: the build ran $((SECONDS - start)) s"

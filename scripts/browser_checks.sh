#!/usr/bin/env bash
# The pictures in a browser: `packoracle draw`'s SVG (the README's Megatron example, a 4,096-slot row) and
# `packoracle verify --html`'s page (a dump with violations, a clean one) opened in headless Chromium, a
# screenshot of each kept in build/screenshots/ (CI artifacts), and the pages' DOM checked for what must be
# visible (python/tests_browser/). Installs what it needs when missing: Debian's chromium, chromium-driver and
# a monospace font (apt-get, as root or through sudo), and Selenium and pytest pinned (requirements/browser.txt)
# into build-browser-venv/. Needs build/cli/packoracle (./scripts/setup.sh), or PACKORACLE_BIN.
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v chromedriver >/dev/null || missing+=(chromium-driver)
fc-list 2>/dev/null | grep -q "DejaVu Sans Mono" || missing+=(fonts-dejavu-core)
if ((${#missing[@]})); then
  echo "browser checks: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null ||
    { $sudo apt-get update >/dev/null && $sudo apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; }
fi
venv=build-browser-venv
if ! "$venv/bin/python" -c "import selenium, pytest" 2>/dev/null; then
  echo "browser checks: pip install -r requirements/browser.txt into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --progress-bar off -r requirements/browser.txt
fi
export PACKORACLE_BIN="${PACKORACLE_BIN:-$PWD/build/cli/packoracle}"
export SCREENSHOTS="$PWD/build/screenshots"
rm -rf "$SCREENSHOTS"
mkdir -p "$SCREENSHOTS"
# SE_OFFLINE: Selenium Manager never looks for a browser or driver to download; both are Debian's.
SE_OFFLINE=true "$venv/bin/python" -m pytest -q -p no:cacheprovider --rootdir python/tests_browser \
  python/tests_browser "$@"
echo "browser checks: screenshots in $SCREENSHOTS: $(ls "$SCREENSHOTS" | tr '\n' ' ')"

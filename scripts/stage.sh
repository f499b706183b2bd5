# Sourced by the test scripts: `stage NAME COMMAND...` says what starts, runs the command and prints how long it
# took, prefixed with the script's name ("test.sh: build ..." then "test.sh: build took 403 s"); a failure stops the script (set -e).
stage() {
  local name=$1
  shift
  local start=$SECONDS
  echo "$(basename "$0"): $name ..."
  "$@"
  echo "$(basename "$0"): $name took $((SECONDS - start)) s"
}

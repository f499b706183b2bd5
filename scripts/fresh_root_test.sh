#!/usr/bin/env bash
# Developer tool, not run by CI: proves that the README's two Quick-start commands install everything they
# need on a truly fresh Debian 12. It builds a minimal bookworm root with debootstrap, clones this repository's
# HEAD into it (committed work only) and, under chroot, runs exactly `./scripts/run.sh` and then
# `./scripts/test.sh` from the repository folder, as root, printing the time each took. Fails if either fails.
#
#   sudo scripts/fresh_root_test.sh [--pristine] [--reuse-clone] [--only run|test|CMD] [DIR]
#
# Must run as root; DIR defaults to /work/fresh-root. DIR is reused when it already holds a complete root
# (debootstrap takes minutes); whatever an earlier run installed into it then stays. `--pristine` restores DIR
# from the snapshot DIR.minbase.tar taken right after debootstrap (made on the first run), so the Debian
# packages are installed from scratch again. To re-run after a fix without rebuilding everything:
# `--reuse-clone` moves the clone already in the root to HEAD and keeps its build directories, `--only run`
# (or `--only test`) runs one of the two commands, `--only CMD` any shell command from the repository folder
# (`--only './scripts/setup.sh --deps && ./scripts/python_tests.sh'`: the Python stage alone).
# The log goes to DIR.<date>.log as well as to the terminal. Takes tens of minutes (the whole build three times:
# build/, build-asan/, build-fuzz/).
set -euo pipefail

pristine=0
reuse_clone=0
only=""
dir=/work/fresh-root
while (($#)); do
  case $1 in
    --pristine) pristine=1 ;;
    --reuse-clone) reuse_clone=1 ;;
    --only) only=${2:-}; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    -*) echo "fresh_root_test: unknown option $1" >&2; exit 2 ;;
    *) dir=$1 ;;
  esac
  shift
done
if [ "$(id -u)" -ne 0 ]; then
  echo "fresh_root_test: must run as root (debootstrap, mount, chroot)" >&2
  exit 2
fi
dir=$(realpath -m "$dir")
if [ "$dir" = / ]; then echo "fresh_root_test: DIR must not be /" >&2; exit 2; fi
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
head=$(git -C "$repo" rev-parse HEAD)
log="$dir.$(date +%Y%m%dT%H%M%S).log"
mkdir -p "$(dirname "$dir")"
exec > >(tee -a "$log") 2>&1
echo "fresh_root_test: root $dir, repository $repo at $(git -C "$repo" log --oneline -1 HEAD), log $log"
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
  echo "fresh_root_test: note: uncommitted changes are not tested (the root gets a clone of HEAD)"
fi

mounts=()  # mounted inside the root, in mount order
in_root_pids() {  # the processes running inside the root (all started by this script)
  local p
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$dir" ] && echo "${p#/proc/}"
  done
  return 0
}
stop_leftovers() {  # a command killed from outside leaves its children (a build) running in the root
  local pids
  pids=$(in_root_pids)
  if [ -n "$pids" ]; then
    echo "fresh_root_test: stopping what still runs in the root: $(echo $pids)"
    kill $pids 2>/dev/null || true
    sleep 2
    pids=$(in_root_pids)
    if [ -n "$pids" ]; then kill -9 $pids 2>/dev/null || true; fi
  fi
}
cleanup() {
  local i
  stop_leftovers
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount -R "${mounts[i]}" 2>/dev/null || umount -R -l "${mounts[i]}" || echo "fresh_root_test: could not unmount ${mounts[i]}"
  done
}
trap cleanup EXIT
# Nothing may be mounted under the root when it is deleted or restored (rm -rf would go into /dev or /opt).
assert_unmounted() {
  local left
  left=$(findmnt -rn -o TARGET | awk -v d="$dir" 'index($0, d "/") == 1 || $0 == d')
  if [ -n "$left" ]; then
    echo "fresh_root_test: still mounted under $dir (unmount first):" >&2
    echo "$left" >&2
    exit 1
  fi
}
mnt() {  # mnt TARGET MOUNT-ARGUMENTS...: mounts, and remembers TARGET for cleanup
  local target=$1
  shift
  mount "$@" "$target"
  mounts+=("$target")
}
timed() {  # timed NAME COMMAND...: runs it, prints its time, returns its status
  local name=$1 start=$SECONDS rc=0
  shift
  "$@" || rc=$?
  echo "fresh_root_test: $name took $((SECONDS - start)) s ($( ((rc == 0)) && echo ok || echo "FAILED, status $rc"))"
  return "$rc"
}

# 1. The root: debootstrap's minimal variant of Debian 12, reused if complete.
complete() { [ -x "$dir/usr/bin/apt-get" ] && [ -x "$dir/bin/bash" ] && [ ! -e "$dir/debootstrap" ]; }
assert_unmounted
if ((pristine)) && [ -f "$dir.minbase.tar" ]; then
  echo "fresh_root_test: restoring $dir from $dir.minbase.tar"
  rm -rf --one-file-system "$dir"
  mkdir -p "$dir"
  tar -C "$dir" -xpf "$dir.minbase.tar"
fi
if complete; then
  echo "fresh_root_test: reusing the root in $dir"
  if [ ! -f "$dir.minbase.tar" ] && [ ! -e "$dir/root/packoracle" ]; then  # never used: still pristine
    tar -C "$dir" -cpf "$dir.minbase.tar" .
  fi
else
  if ! command -v debootstrap >/dev/null; then
    echo "fresh_root_test: installing debootstrap"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap
  fi
  rm -rf --one-file-system "$dir"
  timed "debootstrap" debootstrap --variant=minbase bookworm "$dir" http://deb.debian.org/debian
  tar -C "$dir" -cpf "$dir.minbase.tar" .
fi

# 2. The repository: a clone of the current HEAD, as a user would have it.
if ((reuse_clone)) && [ -d "$dir/root/packoracle/.git" ]; then
  echo "fresh_root_test: moving the clone in the root to HEAD (its build directories stay)"
  git -C "$dir/root/packoracle" fetch -q "$repo" "$head"
else
  rm -rf --one-file-system "$dir/root/packoracle"
  git clone -q --no-hardlinks "$repo" "$dir/root/packoracle"
fi
git -C "$dir/root/packoracle" checkout -q --detach "$head"

# 3. What a machine provides: /proc, /sys, /dev, name resolution.
mnt "$dir/proc" -t proc proc
mnt "$dir/sys" -t sysfs sysfs
mnt "$dir/dev" --rbind /dev
mount --make-rslave "$dir/dev"
cp -L --remove-destination /etc/resolv.conf "$dir/etc/resolv.conf"
# A machine whose egress goes through a TLS proxy trusts the proxy's CA (/usr/local/share/ca-certificates):
# the root gets the same local CAs, which its ca-certificates package adds to the bundle it generates.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$dir/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$dir/usr/local/share/ca-certificates/"
fi
# This machine gives pip a local wheel directory and a constraints file (`pip config list`: /opt/wheels,
# /opt/pypi, /opt/pypi-more, /etc/xdg/pip, and PIP_* variables). A Python stage being added to the scripts will
# `pip install torch==2.13.0`, which must take the CPU wheel on disk: the directories are bind-mounted
# read-only, the pip configuration is copied in, and the PIP_* variables are passed through.
for d in /opt/wheels /opt/pypi /opt/pypi-more; do
  if [ -d "$d" ]; then
    mkdir -p "$dir$d"
    mnt "$dir$d" --bind "$d"
    mount -o remount,bind,ro "$dir$d"
  fi
done
if [ -d /etc/xdg/pip ]; then
  mkdir -p "$dir/etc/xdg"
  rm -rf "$dir/etc/xdg/pip"
  cp -a /etc/xdg/pip "$dir/etc/xdg/pip"
fi

# 4. The README's Quick start, as root in the fresh root, with a login-like environment.
env_vars=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
          TERM="${TERM:-dumb}")
while IFS= read -r var; do env_vars+=("$var"); done < <(env | grep '^PIP_' || true)
in_root() { chroot "$dir" /usr/bin/env -i "${env_vars[@]}" /bin/bash -c "cd /root/packoracle && $1"; }
status=0
case $only in
  ""|run|test)
    if [ "$only" != test ]; then
      timed "./scripts/run.sh" in_root ./scripts/run.sh || status=1
      stop_leftovers
    fi
    if [ "$only" != run ]; then
      timed "./scripts/test.sh" in_root ./scripts/test.sh || status=1
      stop_leftovers
    fi
    ;;
  *)
    timed "$only" in_root "$only" || status=1
    stop_leftovers
    ;;
esac
what="both Quick-start commands"
case $only in
  "") ;;
  run|test) what="./scripts/$only.sh" ;;
  *) what="$only" ;;
esac
if ((status)); then
  echo "fresh_root_test: FAILED (log $log)"
else
  echo "fresh_root_test: $what passed on a fresh Debian 12 root (log $log)"
fi
exit "$status"

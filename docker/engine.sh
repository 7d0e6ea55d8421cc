#!/usr/bin/env bash
# The container engine of this machine and the flags its `run` needs here; used by docker/build.sh and
# the container tests (tests/test_container.py), so both choose the same way.
#
#   docker/engine.sh name         podman or docker: the first that can run containers here
#                                 ($CONTAINER_ENGINE chooses one); exit 1 with the reason when none can
#   docker/engine.sh global       flags before podman's subcommand (--runtime runc where runc is installed:
#                                 crun refuses hybrid cgroup v1 hosts), one per line
#   docker/engine.sh run-flags    flags for `run`: ulimits within this host's hard limits (a container may
#                                 not raise them without CAP_SYS_RESOURCE), one per line
set -euo pipefail

engine_works() {  # an engine whose daemon (docker) or storage (podman) answers
  command -v "$1" >/dev/null 2>&1 && timeout 60 "$1" info >/dev/null 2>&1
}

engine_name() {
  if [ -n "${CONTAINER_ENGINE:-}" ]; then
    engine_works "$CONTAINER_ENGINE" && { echo "$CONTAINER_ENGINE"; return 0; }
    echo "CONTAINER_ENGINE=$CONTAINER_ENGINE cannot run containers here ('$CONTAINER_ENGINE info' fails)" >&2
    return 1
  fi
  for e in podman docker; do
    engine_works "$e" && { echo "$e"; return 0; }
  done
  local seen=""
  for e in podman docker; do command -v "$e" >/dev/null 2>&1 && seen="$seen $e"; done
  if [ -n "$seen" ]; then
    echo "no container engine can run containers here (installed:$seen; '<engine> info' fails)" >&2
  else
    echo "no container engine (podman or docker) is installed" >&2
  fi
  return 1
}

global_flags() {
  local e
  e=$(engine_name)
  if [ "$e" = podman ] && command -v runc >/dev/null 2>&1; then
    echo "--runtime"; echo "${GEARBOX_HIL_OCI_RUNTIME:-runc}"
  fi
}

run_flags() {
  local e nofile_soft nofile_hard nproc_hard pid_max
  e=$(engine_name)
  [ "$e" = podman ] || return 0  # docker's daemon sets limits it is allowed to set
  # podman asks for nofile 1048576 and an nproc of its own by default: refused where the hard limits are lower
  nofile_soft=$(ulimit -Sn); nofile_hard=$(ulimit -Hn)
  nproc_hard=$(ulimit -Hu); pid_max=$(cat /proc/sys/kernel/pid_max 2>/dev/null || echo 32768)
  [ "$nproc_hard" = unlimited ] && nproc_hard=$pid_max
  [ "$nproc_hard" -gt "$pid_max" ] && nproc_hard=$pid_max
  [ "$nofile_hard" = unlimited ] && nofile_hard=1048576
  [ "$nofile_soft" = unlimited ] && nofile_soft=$nofile_hard
  echo "--ulimit"; echo "nofile=$nofile_soft:$nofile_hard"
  echo "--ulimit"; echo "nproc=$nproc_hard:$nproc_hard"
}

case "${1:-}" in
  name) engine_name ;;
  global) global_flags ;;
  run-flags) run_flags ;;
  *) echo "usage: $0 name|global|run-flags" >&2; exit 2 ;;
esac

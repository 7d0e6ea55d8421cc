#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment in .venv and install the
# project with the extras named by the first argument (default "plot": what the
# demo needs; ./test.sh asks for "test,plot,campaign,record,web,fmi,instruments,gpio").  Sourced by demo.sh and test.sh.
# Idempotent: installs again only when pyproject.toml or the extras changed; the
# stamp that says so is written only after pip installed everything.
#
# Second argument "--background" (demo.sh): install only what compiling the plant
# code needs (EARLY: numpy, numba, msgpack) now, and the rest in the background
# while the caller compiles: first the other dependencies (what `python -m
# server.cli serve` needs), then, at a lower priority (nice 10), the project
# itself (editable: the `gearbox-hil` command), its extras and pip;
# `setup_wait server` / `setup_wait` wait for the first part / for everything (and
# fail, with pip's messages, if it failed).  On a fresh clone the compile then
# starts about 4 s after the demo instead of about 16 s.
#
# The virtual environment is created without pip when this Python's own pip
# (>= 22.3, `pip --python`) can install into it: venv's ensurepip costs about 4 s;
# pip is then installed into it with the rest.  Byte-code is compiled when a
# module is first imported, not for every file of every package at install time
# (--no-compile: about 7 s less on a first set-up).  pip's output is shortened to
# a line per package, with a line every few seconds while it works (SETUP_BEAT_S).  The installs are made by
# uv (`uv pip install`, pip's settings passed on: _setup_uv in scripts/setup_lib.sh), from PATH or installed by
# pip into the new environment first; by pip when uv cannot be installed or GEARBOX_HIL_SETUP_UV=0 says so.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${GEARBOX_HIL_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"
EXTRAS="${1:-plot}"
SETUP_MODE="${2:-}"
SETUP_INSTALLER=pip  # uv when _setup_uv chooses it
EARLY="numpy numba msgpack tomli"  # what `python -m server.cli.warmup` imports (tests/test_bootstrap.py checks it)
GEARBOX_HIL_SETUP_PID=""
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null; then
  echo "gearbox-hil needs Python >= 3.10 (found: $("$PY" --version 2>&1))" >&2
  exit 1
fi

source "$ROOT/scripts/setup_lib.sh"  # _setup_us, _setup_show, _setup_early

# which pip installs into the virtual environment: its own, else this Python's (pip >= 22.3 has --python),
# called as the interpreter itself (a version manager's shim around python3, pyenv's, runs a hook after pip)
_SETUP_OUTER_PY=""
_setup_outer_pip() {
  if [ -z "$_SETUP_OUTER_PY" ]; then
    _SETUP_OUTER_PY="$("$PY" -c 'import sys, pip
print(sys.executable if tuple(map(int, pip.__version__.split(".")[:2])) >= (22, 3) else "-")' 2>/dev/null || echo -)"
  fi
  [ "$_SETUP_OUTER_PY" != - ]
}
if [ ! -x "$VENV/bin/python" ]; then
  echo "[set-up] creating the virtual environment in $VENV"
  if _setup_outer_pip; then "$_SETUP_OUTER_PY" -m venv --without-pip "$VENV"; else "$PY" -m venv "$VENV"; fi
fi
# a set-up an earlier ./demo.sh left installing in the background (stopped with Ctrl-C while it compiled):
# waited for, so that two pips never install into one environment at once
if [ -f "$VENV/.gearbox-hil-setup/pid" ]; then
  while kill -0 "$(cat "$VENV/.gearbox-hil-setup/pid")" 2>/dev/null; do
    echo "[set-up] waiting for the install an earlier run left in the background"
    sleep 1
  done
fi
STAMP="$VENV/.gearbox-hil-installed-${EXTRAS//,/-}"
HASH="$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$HASH" ]; then
  if "$VENV/bin/python" -c 'import pip' 2>/dev/null; then
    PIP=("$VENV/bin/python" -m pip)
  elif _setup_outer_pip; then
    PIP=("$_SETUP_OUTER_PY" -m pip --python "$VENV/bin/python")
  else
    "$VENV/bin/python" -m ensurepip --default-pip >/dev/null
    PIP=("$VENV/bin/python" -m pip)
  fi
  # uv, where it is at hand, installs the same requirements from the same indexes several times faster than pip
  # (parallel downloads, its own cache: BENCHMARKS.md, cold start); else pip (_setup_uv in scripts/setup_lib.sh)
  if ! _setup_uv "$VENV" "${PIP[@]}"; then
    PIP+=(install --no-compile --disable-pip-version-check --progress-bar off)
  fi
  mapfile -t FIRST < <(_setup_early "$ROOT/pyproject.toml" $EARLY)
  if [ "$SETUP_MODE" = "--background" ] && [ "${#FIRST[@]}" -gt 0 ]; then
    echo "[set-up] installing what compiling needs first: ${FIRST[*]%%[<>=;]*}"
    PYTHONUNBUFFERED=1 "${PIP[@]}" "${FIRST[@]}" 2>&1 | _setup_show
    SETUP_DIR="$VENV/.gearbox-hil-setup"
    rm -rf "$SETUP_DIR" && mkdir -p "$SETUP_DIR"
    echo "[set-up] installing the rest of gearbox-hil[$EXTRAS] in the background (the installer's messages:" \
      "$SETUP_DIR/pip.log)"
    (
      echo "$BASHPID" > "$SETUP_DIR/pid"
      began="$(_setup_us)"
      # what the server needs: the other dependencies as pyproject.toml states them (no build of the project:
      # demo.sh runs the server as python -m server.cli from the project folder)
      rest="$("$VENV/bin/python" - "$ROOT/pyproject.toml" $EARLY <<'PYEOF'
import re, sys
try:
    import tomllib
except ImportError:  # Python 3.10: tomli, installed with the first part
    import tomli as tomllib
deps = tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]
print("\n".join(r for r in deps if re.split(r"[<>=~!; \[]", r)[0] not in sys.argv[2:]))
PYEOF
      )" || exit 1
      REST=()
      if [ -n "$rest" ]; then mapfile -t REST <<< "$rest"; fi
      if [ "${#REST[@]}" -gt 0 ]; then
        "${PIP[@]}" "${REST[@]}" >"$SETUP_DIR/pip.log" 2>&1 || exit 1
      fi
      took=$((($(_setup_us) - began) / 100000))  # in 0.1 s
      echo "[set-up] what the server needs installed (in the background, $((took / 10)).$((took % 10)) s)"
      touch "$SETUP_DIR/server-ready"
      # the project itself (editable), its extras and pip, at a lower priority: the compile beside it is what
      # the user waits for, and only the shift's plot needs them (matplotlib)
      nice -n 10 "${PIP[@]}" -e "$ROOT[$EXTRAS]" pip >>"$SETUP_DIR/pip.log" 2>&1 || exit 1
      echo "$HASH" > "$STAMP"
      took=$((($(_setup_us) - began) / 100000))
      echo "[set-up] gearbox-hil[$EXTRAS] installed (in the background, $((took / 10)).$((took % 10)) s)"
    ) &
    GEARBOX_HIL_SETUP_PID=$!
  else
    echo "[set-up] installing gearbox-hil[$EXTRAS] and its dependencies"
    PYTHONUNBUFFERED=1 "${PIP[@]}" -e "$ROOT[$EXTRAS]" pip 2>&1 | _setup_show
    echo "$HASH" > "$STAMP"
  fi
fi
export PATH="$VENV/bin:$PATH"

# Wait for the background install of "--background" (nothing to do otherwise): `setup_wait server` until
# what `gearbox-hil serve` needs is in, `setup_wait` until everything is.  Returns 1, after the installer's messages, if
# the install failed.  A line when one is due (_setup_due in scripts/setup_lib.sh: every few seconds, then a third
# of the time so far) while it waits.
setup_wait() {
  local pid="${GEARBOX_HIL_SETUP_PID:-}" began last now what="gearbox-hil[$EXTRAS]"
  [ -n "$pid" ] || return 0
  if [ "${1:-}" = server ]; then what="what the server needs"; fi
  began="$(_setup_us)"
  last="$began"
  while kill -0 "$pid" 2>/dev/null; do
    if [ "${1:-}" = server ] && [ -f "$VENV/.gearbox-hil-setup/server-ready" ]; then return 0; fi
    sleep 0.1
    now="$(_setup_us)"
    if [ $((now - last)) -ge "$(_setup_due "$began" "$now")" ]; then
      echo "[set-up]   still installing $what ($(((now - began) / 1000000)) s)"
      last="$now"
    fi
  done
  GEARBOX_HIL_SETUP_PID=""
  if ! wait "$pid"; then
    echo "[set-up] installing $what failed; ${SETUP_INSTALLER:-pip} said:" >&2
    cat "$VENV/.gearbox-hil-setup/pip.log" >&2 || true
    return 1
  fi
}

#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment in .venv and install the
# project with the extras named by the first argument (default "plot": what the
# demo needs; ./test.sh asks for "test,plot,campaign,record").  Sourced by demo.sh and test.sh.
# Idempotent: installs again only when pyproject.toml or the extras changed.
# Byte-code is compiled when a module is first imported, not for every file of
# every package at install time (--no-compile: about 7 s less on a first set-up).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${GEARBOX_HIL_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"
EXTRAS="${1:-plot}"
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null; then
  echo "gearbox-hil needs Python >= 3.10 (found: $("$PY" --version 2>&1))" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "[set-up] creating the virtual environment in $VENV"
  "$PY" -m venv "$VENV"
fi
STAMP="$VENV/.gearbox-hil-installed-${EXTRAS//,/-}"
HASH="$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$HASH" ]; then
  echo "[set-up] installing gearbox-hil[$EXTRAS] and its dependencies"
  "$VENV/bin/python" -m pip install --quiet --no-compile --disable-pip-version-check -e "$ROOT[$EXTRAS]"
  echo "$HASH" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"

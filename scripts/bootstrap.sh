#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment in .venv and install
# the project with its test and plot extras.  Idempotent: reinstalls only
# when pyproject.toml changed.  Sourced by demo.sh and test.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${GEARBOX_HIL_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null; then
  echo "gearbox-hil needs Python >= 3.10 (found: $("$PY" --version 2>&1))" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "[bootstrap] creating virtual environment in $VENV"
  "$PY" -m venv "$VENV"
fi
STAMP="$VENV/.gearbox-hil-installed"
HASH="$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$HASH" ]; then
  echo "[bootstrap] installing gearbox-hil and its dependencies"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -e "$ROOT[test,plot]"
  echo "$HASH" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"

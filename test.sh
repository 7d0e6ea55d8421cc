#!/usr/bin/env bash
# Run the test suite (sets up .venv on first use).  Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")"
source scripts/bootstrap.sh
exec python -m pytest "$@"

#!/usr/bin/env bash
# Run the test suite (sets up .venv on first use).  Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")"
source scripts/bootstrap.sh test,plot,campaign,record,web,fmi,instruments,gpio
# compile and cache every plant once, with progress shown (a second when everything is cached)
python -m server.cli.warmup
exec python -m pytest "$@"

#!/usr/bin/env bash
# The main job: sets up .venv on first use, then runs the Powershift shift
# demonstration of seed 003 offline and writes its trace, events and plots
# to out/demo/.
set -euo pipefail
cd "$(dirname "$0")"
source scripts/bootstrap.sh
exec gearbox-hil simulate configs/powershift.toml --scenario scenarios/powershift_swaps.toml --out out/demo --plot "$@"

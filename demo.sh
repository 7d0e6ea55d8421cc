#!/usr/bin/env bash
# The main job: sets up .venv on first use, starts the real-time plant server
# on its built-in defaults (Powershift plant, 1 kHz, loopback ZeroMQ, CAN on
# a virtual bus, no hardware), and lets the example controller close a
# clutch-to-clutch shift
# (gear 1 -> gear 3) over ZeroMQ.  The controller prints the shift as it sees
# it and writes a plot and its trace to out/demo/; the server then shuts down
# and prints its timing summary (TET, wake-up lateness, overruns, rate).
# Extra arguments go to `gearbox-hil serve` (e.g. --rate 2000).
set -euo pipefail
cd "$(dirname "$0")"
source scripts/bootstrap.sh
# The first run on a machine compiles the plant code (about half a minute, a line per function);
# later runs load it from the cache in about a second.
python -m server.warmup powershift

OUT=out/demo
mkdir -p "$OUT"
READY="$OUT/server_ready.json"
rm -f "$READY"

gearbox-hil serve powershift --quiet --ready-file "$READY" --summary-json "$OUT/server_status.json" "$@" &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true' EXIT

# The code is compiled and cached already (above): the server starts in a second or two.
for _ in $(seq 1 600); do
  [ -f "$READY" ] && break
  if ! kill -0 "$SERVER" 2>/dev/null; then
    wait "$SERVER"
    exit $?
  fi
  sleep 0.25
done
[ -f "$READY" ] || { echo "demo: the server did not start" >&2; exit 1; }

CONTROL="$(python -c 'import json,sys; print(json.load(open(sys.argv[1]))["endpoints"]["zmq.control"])' "$READY")"
set +e
python examples/closed_loop_swap.py --control "$CONTROL" --plot "$OUT/closed_loop_swap.png" \
  --csv "$OUT/closed_loop_swap.csv" --shutdown
SHIFT=$?
[ "$SHIFT" -eq 0 ] || kill -TERM "$SERVER" 2>/dev/null || true  # SIGTERM: a clean stop with the summary
wait "$SERVER"
SERVED=$?
set -e
trap - EXIT
echo "demo: plot $OUT/closed_loop_swap.png, trace $OUT/closed_loop_swap.csv, server status $OUT/server_status.json"
exit $(( SHIFT != 0 ? SHIFT : SERVED ))

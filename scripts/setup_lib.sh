# Helpers of scripts/bootstrap.sh (sourced by it; tests/test_bootstrap.py checks them): the set-up's progress
# (pip's output shortened to a line per package, and a "still installing" line after SETUP_BEAT_S seconds
# without one while pip works, or a third of the time so far) and the requirements it installs first.

_setup_us() { echo "${EPOCHREALTIME/./}"; }  # now in microseconds (bash >= 5)
# a few seconds, or a third of the time so far if that is longer: alive on a screen and in a CI log, and a
# few lines however long pip takes on a busy machine (about 3 + ln(T / 15 s) / ln(4 / 3) for a wait of T s).
# The time so far counts from GEARBOX_HIL_SETUP_BEGAN_US (demo.sh: its start, in microseconds) if set.
SETUP_BEAT_S="${GEARBOX_HIL_SETUP_BEAT_S:-5}"
# _setup_due BEGAN_US NOW_US: microseconds after the last line that the next "still" line is due
_setup_due() {
  local began="${GEARBOX_HIL_SETUP_BEGAN_US:-$1}" beat=$((SETUP_BEAT_S * 1000000)) third
  [ "$began" -le "$1" ] || began="$1"
  third=$((($2 - began) / 3))
  echo $((third > beat ? third : beat))
}

# pip's output (stdin) as a line per package it resolves or unpacks, and a line when one is due (_setup_due)
_setup_show() {
  local began last now line="" part n
  began="$(_setup_us)"
  last="$began"
  while :; do
    if IFS= read -r -t 0.2 part; then
      line+="$part"
      case "$line" in
        "Collecting "*) part="${line#Collecting }"; echo "[set-up]   resolving ${part%% (*}" ;;
        "Processing "*)  # a wheel's file: name-version-tags.whl
          part="${line#Processing }"; part="${part%% (*}"; part="${part##*/}"; n="${part#*-}"
          echo "[set-up]   resolving ${part%%-*} (${n%%-*})" ;;
        "Installing collected packages: "*)
          part="${line#*: }"; part="${part//[^,]/}"
          echo "[set-up]   unpacking $((${#part} + 1)) packages" ;;
        "Building editable for "*"started") echo "[set-up]   building the editable install of gearbox-hil" ;;
        "Successfully installed "*) echo "[set-up]   installed" ;;
        *) line=""; continue ;;
      esac
      line=""
      last="$(_setup_us)"
    elif [ $? -gt 128 ]; then  # timed out: a line so far held in `part`, or nothing yet
      line+="$part"
      now="$(_setup_us)"
      if [ $((now - last)) -ge "$(_setup_due "$began" "$now")" ]; then
        echo "[set-up]   still installing ($(((now - began) / 1000000)) s)"
        last="$now"
      fi
    else
      break  # end of pip's output
    fi
  done
}


# The requirement lines of these packages in pyproject.toml's dependencies, as it states them (markers included)
_setup_early() {
  local toml="$1" name
  shift
  for name in "$@"; do
    sed -n "/^dependencies = \[/,/^\]/s/^ *\"\($name[<>=~!; ][^\"]*\)\",\$/\1/p" "$toml"
  done
}

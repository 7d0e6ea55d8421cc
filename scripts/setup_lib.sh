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

# pip's or uv's output (stdin) as a line per package it resolves or unpacks, its errors as they are, and a line when
# one is due (_setup_due)
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
        # uv's (`uv pip install`): a summary line per phase, then a line per package installed
        "Resolved "*" in "*) part="${line#Resolved }"; echo "[set-up]   resolved ${part%% in *}" ;;
        "Prepared "*" in "*) part="${line#Prepared }"; echo "[set-up]   unpacking ${part%% in *}" ;;
        "Building "*" @ file://"*) echo "[set-up]   building the editable install of gearbox-hil" ;;
        "Installed "*" in "*) echo "[set-up]   installed" ;;
        " + "*) part="${line# + }"; echo "[set-up]   installed ${part%%==*} (${part#*==})" ;;
        "ERROR"* | "error:"* | "  × "* | "  ╰─▶ "* | "  help: "*) echo "$line" ;;
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

# uv in place of pip: `_setup_uv VENV PIP...` (PIP: the pip command that installs into VENV, without `install`)
# sets PIP (the caller's array) to `uv pip install` when uv is at hand (on PATH, or in VENV from an earlier set-up),
# with pip's own settings, which uv does not read (index URLs, find-links, constraints, the certificate), and pip's
# choice among several indexes (the best version of all).  Where there is no uv, PIP installs it into VENV first
# (1.7 s on a quiet host; the first demo on a fresh clone reached its first tick 4-5 s sooner with it, the rest
# installing with half the CPU beside the compile; on a host at load 17-23 pip needed 36-55 s to install uv, as
# much as uv then saved: BENCHMARKS.md, cold start).  GEARBOX_HIL_SETUP_UV=0 (or GEARBOX_HIL_SETUP_PIP=1) keeps pip.
# Returns 1, PIP untouched, when uv is not wanted or cannot be installed (pip then installs).
_setup_uv() {
  local venv="$1" key value v uv line
  shift
  [ "${GEARBOX_HIL_SETUP_PIP:-}" != 1 ] && [ "${GEARBOX_HIL_SETUP_UV:-1}" != 0 ] || return 1
  if [ -x "$venv/bin/uv" ]; then
    uv="$venv/bin/uv"
  elif uv="$(command -v uv)"; then
    :
  else
    uv="$venv/bin/uv"
    echo "[set-up] installing uv (with pip), which installs the rest"
    if ! "$@" install --no-compile --disable-pip-version-check --progress-bar off uv 2>&1 | _setup_show ||
      [ ! -x "$uv" ]; then
      echo "[set-up] uv could not be installed (pip's messages above): pip installs"
      return 1
    fi
  fi
  local cmd=("$uv" pip install --python "$venv/bin/python" --index-strategy unsafe-best-match)
  while IFS= read -r line; do  # key=value a line (_setup_pip_settings)
    key="${line%%=*}"
    value="${line#*=}"
    case "$key" in
      index-url) cmd+=(--index-url "$value") ;;
      extra-index-url) for v in $value; do cmd+=(--extra-index-url "$v"); done ;;
      find-links) for v in $value; do cmd+=(--find-links "$v"); done ;;
      constraint) for v in $value; do cmd+=(--constraint "$v"); done ;;
      cert) cmd=(env SSL_CERT_FILE="$value" "${cmd[@]}") ;;
    esac
  done < <(_setup_pip_settings)
  PIP=("${cmd[@]}")
  SETUP_INSTALLER=uv  # the installer's name in the set-up's messages
}

# pip's install settings that uv needs passed on, a line `key=value` each: pip's configuration files in pip's
# order (a later one wins), then its PIP_* variables; read here, not with `pip config list`, which costs pip's
# start twice (16 s at load 21)
_setup_pip_settings() {
  "${PY:-python3}" - <<'PYEOF' 2>/dev/null || true
import configparser, os
home = os.path.expanduser("~")
files = [os.path.join(d, "pip", "pip.conf") for d in reversed(os.environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(":"))]
files += ["/etc/pip.conf", os.path.join(home, ".pip", "pip.conf"),
          os.path.join(os.environ.get("XDG_CONFIG_HOME", os.path.join(home, ".config")), "pip", "pip.conf")]
files += [os.environ["PIP_CONFIG_FILE"]] if os.environ.get("PIP_CONFIG_FILE") else []
keys = ("index-url", "extra-index-url", "find-links", "constraint", "cert")
got = {}
for path in files:
    conf = configparser.RawConfigParser()
    try:
        conf.read(path)
    except (configparser.Error, OSError):
        continue
    for section in ("global", "install"):
        got.update({k: conf.get(section, k) for k in keys if conf.has_option(section, k)})
got.update({k: os.environ["PIP_" + k.upper().replace("-", "_")] for k in keys
            if os.environ.get("PIP_" + k.upper().replace("-", "_"))})
for k, v in got.items():
    print(f"{k}={' '.join(v.split())}")
PYEOF
}

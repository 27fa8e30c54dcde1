#!/usr/bin/env bash
# The GPU kit: every GPU promise measured in one short run, offline. See benchmarks/gpu/README.md.
#
#   bash benchmarks/gpu/run.sh [RESULTS_DIR] [--dry] [--only=NAME,...]
#
# Run from the repository root on the GPU machine (no network): installs the wheels of .whl/
# (benchmarks/gpu/fetch_wheels.sh) into $KIT_SITE (default /tmp/site), prints nvidia-smi and
# jax.devices(), runs the eight checks each under its own timeout (the whole script in under
# 8 minutes: the last three, block2d, layouts2d and streaming, run only if time is left; --only=NAME runs one alone), and
# writes results.json and run.log into RESULTS_DIR (default: $OUT, else ./gpu-results). --dry: tiny
# sizes on the CPU (JAX_PLATFORMS=cpu, a fake GPU for Ray). --only=trainer,predict: just those
# checks (a rerun); names: trainer layouts fractional auto predict block2d layouts2d streaming.
set -uo pipefail
DRY=0
ONLY=""
DEST="${OUT:-./gpu-results}"
for arg in "$@"; do
    case "$arg" in
        --dry) DRY=1 ;;
        --only=*) ONLY=",${arg#--only=}," ;;
        -*) echo "run.sh: unknown option $arg; use [RESULTS_DIR] [--dry] [--only=NAME,...]" >&2; exit 2 ;;
        *) DEST="$arg" ;;
    esac
done
[[ -f pyproject.toml && -d benchmarks/gpu ]] || { echo "run.sh: run it from the repository root" >&2; exit 2; }
mkdir -p "$DEST"
exec > >(tee "$DEST/run.log") 2>&1

BUDGET_S="${KIT_BUDGET_S:-465}"  # the whole script, install included: under 8 minutes
PY="${PYTHON:-python3}"
SITE="${KIT_SITE:-/tmp/site}"
WORK="$(mktemp -d)"
echo "run.sh: $(date -u +%FT%TZ), dry=$DRY, budget ${BUDGET_S} s, results in $DEST"

shopt -s nullglob
WHEELS=(.whl/*.whl)
(( ${#WHEELS[@]} )) || { echo "run.sh: no wheels in .whl/; run benchmarks/gpu/fetch_wheels.sh first (and carry .whl)" >&2; exit 1; }
rm -rf "$SITE"
"$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "${WHEELS[@]}" \
    || { echo "run.sh: installing the wheels failed" >&2; exit 1; }
echo "run.sh: installed ${#WHEELS[@]} wheels into $SITE in ${SECONDS} s"
export PYTHONPATH="$SITE:$PWD"
export RAY_USAGE_STATS_ENABLED=0
# Ray 2.60 turns token authentication on for a new local instance (and writes ~/.ray/auth_token
# if there is none): give it a token of this run instead, through the environment.
export RAY_AUTH_MODE=token
RAY_AUTH_TOKEN="$("$PY" -c 'import secrets; print(secrets.token_hex(32))')"
export RAY_AUTH_TOKEN
FLAGS=()
if (( DRY )); then
    export JAX_PLATFORMS=cpu
    FLAGS=(--dry)
fi

if command -v nvidia-smi >/dev/null; then nvidia-smi; else echo "run.sh: nvidia-smi: not found"; fi
timeout -k 5 90 "$PY" -m benchmarks.gpu.summary env "$WORK/env.json" || echo "run.sh: environment probe failed (exit $?)"

# run_check NAME LIMIT_S: the check under `timeout`, given at most what is left of the budget.
run_check() {
    local name="$1" limit="$2" left start rc
    [[ -z "$ONLY" || "$ONLY" == *",$name,"* ]] || return 0
    left=$(( BUDGET_S - SECONDS - 10 ))
    (( limit > left )) && limit=$left
    if (( limit < 20 )); then
        echo "run.sh: check $name skipped: ${left} s left of the budget"
        echo "-1 0 0" > "$WORK/$name.status"
        return
    fi
    echo "=== check $name (limit ${limit} s, at ${SECONDS} s) ==="
    start=$SECONDS
    KIT_CHECK_S=$limit timeout -k 10 "$limit" "$PY" -m "benchmarks.gpu.check_$name" --out "$WORK/$name.json" "${FLAGS[@]}"
    rc=$?
    echo "$rc $limit $(( SECONDS - start ))" > "$WORK/$name.status"
    echo "=== check $name: exit $rc after $(( SECONDS - start )) s ==="
}

run_check trainer 145
run_check layouts 60
run_check fractional 95
run_check auto 75
run_check predict 70
run_check block2d 90
run_check layouts2d 90
run_check streaming 240

"$PY" -m benchmarks.gpu.summary collect "$WORK" "$DEST/results.json"
echo "run.sh: done in ${SECONDS} s"
rm -rf "$WORK"

#!/usr/bin/env bash
# A Ray "cluster" on one machine: a head and N worker nodes, each its own `ray start` process,
# for trying `sweep run --address` (or sweep.run(..., address=...)) without a real cluster (Linux).
#
#   cluster/local.sh start [--workers N] [--worker-cpus C] [--worker-gpus G] [--head-cpus C]
#                          [--port P] [--dir D]
#   cluster/local.sh status [--dir D]
#   cluster/local.sh stop   [--dir D]
#
# GPUs may be fake (--worker-gpus 1 on a CPU-only machine): Ray then schedules trials that ask
# for GPUs onto the workers, and JAX runs on the CPU. The head gets --head-cpus (default 0) so
# that trials run on the workers. Every node has its own temp dir and its own ports (derived
# from --port), so the cluster neither collides with another Ray on this machine nor becomes
# the one `ray.init()` finds by default. `start` prints the address to pass to `--address`.
#
# `stop` ends exactly the processes `start` launched (their process groups, recorded in
# <dir>/pids), never other Ray instances: it does not call `ray stop`.
set -euo pipefail

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
[[ "$cmd" == "-h" || "$cmd" == "--help" ]] && { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
workers=2 worker_cpus=1 worker_gpus=0 head_cpus=0 port="${SWEEP_CLUSTER_PORT:-6390}" dir=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --workers) workers="$2"; shift 2 ;;
        --worker-cpus) worker_cpus="$2"; shift 2 ;;
        --worker-gpus | --num-gpus) worker_gpus="$2"; shift 2 ;;
        --head-cpus) head_cpus="$2"; shift 2 ;;
        --port) port="$2"; shift 2 ;;
        --dir) dir="$2"; shift 2 ;;
        -h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "error: unknown option '$1' (see $0 --help)" >&2; exit 2 ;;
    esac
done
# Short default path: Ray's Unix sockets live below it (a socket path may not exceed 107 bytes).
dir="${dir:-${SWEEP_CLUSTER_DIR:-/tmp/sweep-cluster-$port}}"
RAY="${RAY:-ray}"
export RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S="${RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S:-0}"
export RAY_USAGE_STATS_ENABLED=0
# Ray >= 2.5x turns on token authentication for a new head when a token exists; every node and
# every driver must then present it. Use it on all nodes (drivers: export RAY_AUTH_MODE=token).
export RAY_AUTH_MODE="${RAY_AUTH_MODE:-token}"

node_ports() {  # node index -> its per-node port flags (head: 0, workers: 1..N)
    local base=$((port + 10 + 10 * $1)) wmin=$((port + 1000 + 200 * $1))
    echo "--node-manager-port=$base --object-manager-port=$((base + 1))" \
         "--dashboard-agent-grpc-port=$((base + 2)) --dashboard-agent-listen-port=$((base + 3))" \
         "--metrics-export-port=$((base + 4)) --runtime-env-agent-port=$((base + 5))" \
         "--min-worker-port=$wmin --max-worker-port=$((wmin + 199))"
}

launch() {  # name, ray start args...: run `ray start --block` in its own process group
    local name="$1"; shift
    mkdir -p "$dir/$name"
    setsid "$RAY" start --block --disable-usage-stats --temp-dir="$dir/$name" "$@" \
        >"$dir/$name.log" 2>&1 < /dev/null &
    echo "$! $name" >>"$dir/pids"
}

wait_for() {  # node name, seconds: until its `ray start` says the node runs (fails early if it exits)
    local i pid
    pid="$(grep " $1\$" "$dir/pids" | cut -d' ' -f1)"
    for ((i = 0; i < $2 * 10; i++)); do
        grep -q "Ray runtime started" "$dir/$1.log" 2>/dev/null && return 0
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "error: node $1 did not start within $2 s; see $dir/$1.log" >&2
    return 1
}

wait_for_file() {  # path, seconds: `ray start` writes the address file after it says the node runs
    local i
    for ((i = 0; i < $2 * 10; i++)); do
        [[ -s "$1" ]] && return 0
        sleep 0.1
    done
    echo "error: $1 was not written within $2 s" >&2
    return 1
}

ensure_token() {
    [[ "$RAY_AUTH_MODE" != "token" || -n "${RAY_AUTH_TOKEN:-}" || -n "${RAY_AUTH_TOKEN_PATH:-}" ]] && return 0
    [[ -s "$HOME/.ray/auth_token" ]] || "$RAY" get-auth-token --generate >/dev/null
}

alive_nodes() {
    RAY_ADDRESS="$(cat "$dir/address")" python - <<'EOF' 2>/dev/null || echo 0
import logging, ray
ray.init(logging_level=logging.ERROR, log_to_driver=False)
print(sum(1 for n in ray.nodes() if n["Alive"]))
EOF
}

start() {
    if [[ -s "$dir/pids" ]]; then
        echo "error: a local cluster is already recorded in $dir (run '$0 stop --dir $dir' first)" >&2
        exit 1
    fi
    mkdir -p "$dir"
    ensure_token
    : >"$dir/pids"
    launch head --head --port="$port" --include-dashboard=false \
        --num-cpus="$head_cpus" --num-gpus=0 $(node_ports 0)
    wait_for head 60 && wait_for_file "$dir/head/ray_current_cluster" 30 || { stop; exit 1; }
    cp "$dir/head/ray_current_cluster" "$dir/address"
    local address i
    address="$(cat "$dir/address")"
    for ((i = 1; i <= workers; i++)); do
        launch "worker$i" --address="$address" --num-cpus="$worker_cpus" --num-gpus="$worker_gpus" $(node_ports "$i")
    done
    for ((i = 1; i <= workers; i++)); do
        wait_for "worker$i" 60 || { stop; exit 1; }
    done
    echo "local Ray cluster: head + $workers worker(s) ($worker_cpus CPU, $worker_gpus GPU each), state in $dir"
    echo "address: $address"
    echo "use:     RAY_AUTH_MODE=$RAY_AUTH_MODE sweep run SPEC.toml --address $address"
    echo "stop:    $0 stop --dir $dir"
}

status() {
    [[ -s "$dir/pids" ]] || { echo "no local cluster recorded in $dir"; exit 1; }
    echo "address: $(cat "$dir/address" 2>/dev/null || echo '?'); nodes alive: $(alive_nodes)"
    while read -r pid name; do
        if kill -0 "$pid" 2>/dev/null; then echo "  $name: running (pid $pid)"; else echo "  $name: exited"; fi
    done <"$dir/pids"
}

stop() {
    [[ -f "$dir/pids" ]] || { echo "no local cluster recorded in $dir"; return 0; }
    local pid name i alive
    # Workers first, then the head; SIGTERM makes `ray start --block` end its node's processes.
    tac "$dir/pids" | while read -r pid name; do kill -TERM "$pid" 2>/dev/null || true; done
    for ((i = 0; i < 150; i++)); do
        alive=0
        while read -r pid name; do kill -0 -- "-$pid" 2>/dev/null && alive=1; done <"$dir/pids"
        [[ $alive -eq 0 ]] && break
        sleep 0.1
    done
    while read -r pid name; do kill -KILL -- "-$pid" 2>/dev/null || true; done <"$dir/pids"
    rm -f "$dir/pids" "$dir/address"
    echo "stopped the local cluster in $dir"
}

case "$cmd" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) echo "usage: $0 {start|status|stop} [options]   ($0 --help)" >&2; exit 2 ;;
esac

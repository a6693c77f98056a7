#!/usr/bin/env bash
# Start hetgraph's one-node recipe in the background: a Dask scheduler with the hetgraph
# dashboard page, one `dask cuda worker --resources GPU=1` per GPU and CPU workers with
# `--resources CPU=1`, every socket on 127.0.0.1 unless HETGRAPH_HOST names an interface.
# Prints the scheduler's address (for `hetgraph run ... --scheduler ADDRESS`) and waits
# until every worker has joined. deploy/local/stop.sh stops what it started.
#
# Settings, from the environment (defaults in brackets):
#   HETGRAPH_HOST         address every socket listens on [127.0.0.1: this machine only]
#   HETGRAPH_PORT         scheduler port [8786; 0: any free one]
#   HETGRAPH_DASHBOARD    scheduler dashboard host:port [127.0.0.1:8787; "" turns it off]
#   HETGRAPH_GPUS         GPU ids, comma-separated [every GPU nvidia-smi lists; "none"]
#   HETGRAPH_CPU_WORKERS  CPU worker processes [1]
#   HETGRAPH_RUN_DIR      pids, logs and the scheduler file [./hetgraph-local]
#   HETGRAPH_TLS_DIR      certificates from deploy/tls/make-certs.sh: TLS on every link
#   HETGRAPH_WAIT         seconds to wait for the scheduler and the workers [120]
set -euo pipefail

host=${HETGRAPH_HOST:-127.0.0.1}
port=${HETGRAPH_PORT:-8786}
dashboard=${HETGRAPH_DASHBOARD-127.0.0.1:8787}
cpu_workers=${HETGRAPH_CPU_WORKERS:-1}
run_dir=${HETGRAPH_RUN_DIR:-$PWD/hetgraph-local}
wait_s=${HETGRAPH_WAIT:-120}
python=${PYTHON:-python3}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [[ -z ${HETGRAPH_GPUS+x} ]]; then
  gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | paste -sd, - || true)
elif [[ $HETGRAPH_GPUS == none ]]; then
  gpus=""
else
  gpus=$HETGRAPH_GPUS
fi
IFS=, read -r -a gpu_ids <<< "$gpus"

if [[ -e $run_dir/pids ]]; then
  echo "start.sh: $run_dir/pids exists: a cluster runs there; stop it first ($here/stop.sh)" >&2
  exit 2
fi
mkdir -p "$run_dir"
: > "$run_dir/pids"

protocol=()
if [[ -n ${HETGRAPH_TLS_DIR:-} ]]; then
  # Dask reads the CA, the certificates and require-encryption from this file
  export DASK_CONFIG=$HETGRAPH_TLS_DIR/dask.yaml
  [[ -r $DASK_CONFIG ]] || { echo "start.sh: no $DASK_CONFIG (run deploy/tls/make-certs.sh)" >&2; exit 2; }
  protocol=(--protocol tls)
fi
# with the dashboard off the scheduler still serves /health and /metrics: on $host
dash=(--no-dashboard --dashboard-address "$host:0")
if [[ -n $dashboard ]]; then dash=(--dashboard-address "$dashboard"); fi

# each process leads its own process group, so that stop.sh ends it with its children
started() { echo "$1 $2" >> "$run_dir/pids"; }
trap 'echo "start.sh: failed; stopping what started (logs in $run_dir)" >&2; "$here/stop.sh"' ERR

scheduler_file=$run_dir/scheduler.json
rm -f "$scheduler_file"
setsid dask scheduler --host "$host" --port "$port" "${dash[@]}" "${protocol[@]}" \
  --preload hetgraph.dashboard --scheduler-file "$scheduler_file" \
  > "$run_dir/scheduler.log" 2>&1 < /dev/null &
started scheduler $!
for _ in $(seq "$((wait_s * 10))"); do
  if [[ -s $scheduler_file ]] || ! kill -0 "$!" 2> /dev/null; then break; fi
  sleep 0.1
done
if [[ ! -s $scheduler_file ]]; then
  echo "start.sh: the scheduler did not start; the end of $run_dir/scheduler.log:" >&2
  tail -n 5 "$run_dir/scheduler.log" >&2
  false
fi

workers=$((cpu_workers + ${#gpu_ids[@]}))
# each worker process gets an equal share of the machine's memory, as hg.Cluster does
memory=$("$python" -c "from distributed.system import MEMORY_LIMIT; print(MEMORY_LIMIT // $workers)")
common=(--scheduler-file "$scheduler_file" --host "$host" --dashboard-address "$host:0"
        --nthreads 1 --memory-limit "$memory")
for gpu in "${gpu_ids[@]}"; do
  CUDA_VISIBLE_DEVICES=$gpu setsid dask cuda worker "${common[@]}" --resources GPU=1 \
    --name "gpu$gpu" > "$run_dir/gpu$gpu.log" 2>&1 < /dev/null &
  started "gpu$gpu" $!
done
for ((i = 0; i < cpu_workers; i++)); do
  setsid dask worker "${common[@]}" --resources CPU=1 --name "cpu$i" \
    > "$run_dir/cpu$i.log" 2>&1 < /dev/null &
  started "cpu$i" $!
done

worker_pids=$(awk '$1 != "scheduler" {print $2}' "$run_dir/pids")
# shellcheck disable=SC2086 # one argument per pid
joined=$("$python" - "$scheduler_file" "$workers" "$wait_s" $worker_pids <<'PY'
import os
import sys
import time
from distributed import Client

scheduler_file, workers, wait_s, pids = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]
with Client(scheduler_file=scheduler_file, timeout=wait_s) as client:
    deadline = time.monotonic() + wait_s
    while len(client.scheduler_info(n_workers=-1)["workers"]) < workers:
        for pid in pids:  # a worker that exited will never join: fail now
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                sys.exit(f"start.sh: worker process {pid} exited; see its log")
        if time.monotonic() > deadline:
            sys.exit(f"start.sh: fewer than {workers} workers after {wait_s:g} s")
        time.sleep(0.2)
    print(client.scheduler.address)
    print(client.dashboard_link)
PY
)
echo "scheduler ${joined%%$'\n'*}"
if [[ -n $dashboard ]]; then
  echo "dashboard ${joined#*$'\n'} (hetgraph page: /hetgraph)"
fi
trap - ERR
echo "workers: ${#gpu_ids[@]} GPU, $cpu_workers CPU; logs in $run_dir; stop: $here/stop.sh"

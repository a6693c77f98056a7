#!/usr/bin/env bash
# The local recipe on every GPU of this machine against one GPU: starts deploy/local/
# start.sh with one `dask cuda worker` per GPU and one CPU worker, runs PageRank and SSSP
# on an RMAT graph through the scheduler (`hetgraph run --scheduler` and
# hg.Cluster(address=...)), stops it, starts it again with the first GPU and the CPU
# worker, runs the same, stops it, and prints one JSON line comparing the answers (exit 1
# if they differ).
#
# Usage: check-gpus.sh [SCALE]   (RMAT scale, default 24: 16.8M vertices, ~263M arcs)
# Environment: HETGRAPH_CHECK_DIR [a new temporary directory] for the store and results;
#   HETGRAPH_CHECK_DEVICES [gpu,auto] the runs' devices values.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
scale=${1:-24}
work=${HETGRAPH_CHECK_DIR:-$(mktemp -d)}
devices=${HETGRAPH_CHECK_DEVICES:-gpu,auto}
python=${PYTHON:-python3}
mkdir -p "$work"

gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | paste -sd, -)
first=${gpus%%,*}
[[ -n $first ]] || { echo "check-gpus.sh: nvidia-smi lists no GPU" >&2; exit 2; }
[[ $gpus == *,* ]] || echo "check-gpus.sh: one GPU only: comparing it with itself" >&2

export HETGRAPH_RUN_DIR=$work/cluster HETGRAPH_PORT=0 HETGRAPH_DASHBOARD=127.0.0.1:0
trap '"$here/stop.sh" > /dev/null' EXIT
"$python" "$here/check_gpus.py" make "$work/rmat" --scale "$scale" >&2

address() { "$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["address"])' \
  "$HETGRAPH_RUN_DIR/scheduler.json"; }
for setup in "many:$gpus" "one:$first"; do
  IFS=: read -r name ids <<< "$setup"
  HETGRAPH_GPUS=$ids HETGRAPH_CPU_WORKERS=1 "$here/start.sh" >&2
  scheduler=$(address)
  hetgraph run pagerank "$work/rmat" --scheduler "$scheduler" --devices gpu --top 3 \
    --out "$work/$name-cli-pagerank.npy" >&2
  "$python" "$here/check_gpus.py" run "$scheduler" "$work/rmat" "$work/$name.npz" \
    --devices "$devices" >&2
  "$here/stop.sh" >&2
done
"$python" - "$work" <<'PY' >&2
import sys
import numpy as np
many, one = (np.load(f"{sys.argv[1]}/{n}-cli-pagerank.npy")["value"] for n in ("many", "one"))
print("hetgraph run --scheduler, pagerank: max |many - one| =", float(np.abs(many - one).max()))
PY
"$python" "$here/check_gpus.py" compare "$work/many.npz" "$work/one.npz"

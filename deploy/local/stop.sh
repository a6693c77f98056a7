#!/usr/bin/env bash
# Stop what deploy/local/start.sh started: SIGTERM to each process group it recorded
# (workers first, then the scheduler), SIGKILL to any left after HETGRAPH_STOP_WAIT
# seconds [20]. Reads HETGRAPH_RUN_DIR [./hetgraph-local]; keeps the logs there.
set -euo pipefail
run_dir=${HETGRAPH_RUN_DIR:-$PWD/hetgraph-local}
wait_s=${HETGRAPH_STOP_WAIT:-20}
pids_file=$run_dir/pids
[[ -e $pids_file ]] || { echo "stop.sh: nothing recorded in $run_dir"; exit 0; }

groups=()
while read -r role pid; do
  [[ $role == scheduler ]] && continue
  groups+=("$pid")
done < "$pids_file"
scheduler=$(awk '$1 == "scheduler" {print $2}' "$pids_file")

alive() { kill -0 -- "-$1" 2>/dev/null; }
stop_groups() {
  local pid
  for pid in "$@"; do
    if alive "$pid"; then kill -TERM -- "-$pid" 2>/dev/null || true; fi
  done
  for _ in $(seq "$((wait_s * 10))"); do
    local left=0
    for pid in "$@"; do
      if alive "$pid"; then left=1; fi
    done
    if ((left == 0)); then return 0; fi
    sleep 0.1
  done
  for pid in "$@"; do
    if alive "$pid"; then
      echo "stop.sh: process group $pid ignored SIGTERM; killing it" >&2
      kill -KILL -- "-$pid" 2>/dev/null || true
    fi
  done
}
if ((${#groups[@]})); then stop_groups "${groups[@]}"; fi
if [[ -n $scheduler ]]; then stop_groups "$scheduler"; fi
rm -f "$pids_file" "$run_dir/scheduler.json"
echo "stopped (logs in $run_dir)"

#!/usr/bin/env bash
# The GPU checks in one call of the device machine (see ../shared/device/README.md).
#
# Usage (the device tool's command, carrying [".whl", ".data"]):
#   bash bench/device.sh [tests] [gpu] [gpu24] [hybrid] [hybrid24] [hybrid24s]
#   (default: tests gpu)
#   tests   the gpu-marked tests and the cluster and dashboard tests (200-300 s warm;
#           a cold machine took over 300)
#   gpu     bench/gpu.py on RMAT-22, wiki-vote and a shuffled grid-1000 (about 120 s)
#   gpu24   bench/gpu.py on RMAT-24 (about 75 s)
#   hybrid  bench/hybrid.py (about 180 s)
#   hybrid24  bench/hybrid.py on RMAT-24 alone: placements and overhead (about 330 s)
#   hybrid24s the same graph's streamed section, kept beside them (about 175 s; a call
#           of its own)
# The device allows 600 s a call: pick stages that fit. The JSON results are written to
# $OUT (gpu.json and hybrid-rmat24.json start from the committed ones, so --append and
# --keep keep their other graphs and sections);
# copy them into bench/results/ here. Dask's warnings are filtered out of the output,
# whose last 12,000 characters are all that come back.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target .site .whl/*.whl || exit 1
# (as pip does without --no-compile: a fresh process then reads bytecode)
python3 -m compileall -q .site hetgraph >/dev/null 2>&1
export PYTHONPATH=$PWD/.site:$PWD PYTHONUNBUFFERED=1 HETGRAPH_DATA=$PWD/.data
OUT=${OUT:-bench/work}
mkdir -p "$OUT"
# (pytest's summary line stays: it counts warnings)
quiet() { awk '/passed|failed|error/ || tolower($0) !~ /warn|slowdown|consider|see also|^$/'; }
stage() { echo "== $1 ($(date +%T))"; }
[ $# -eq 0 ] && set -- tests gpu
cp bench/results/gpu.json bench/results/hybrid-rmat24.json "$OUT/"
for what in "$@"; do
  stage "$what"
  case $what in
    tests) timeout 420 python3 -m pytest -q -x -p no:cacheprovider tests/test_gpu.py \
             tests/test_hybrid_gpu.py tests/test_dashboard.py tests/test_cluster.py 2>&1 \
             | quiet | tail -25 ;;
    gpu) timeout 240 python3 bench/gpu.py --scales 22 --real wiki-vote --grid 1000 \
           --out "$OUT/gpu.json" --append 2>&1 | quiet | tail -40 ;;
    gpu24) timeout 240 python3 bench/gpu.py --scales 24 --real "" \
             --out "$OUT/gpu.json" --append 2>&1 | quiet | tail -30 ;;
    hybrid) timeout 400 python3 bench/hybrid.py --out "$OUT/hybrid.json" 2>&1 \
              | quiet | tail -60 ;;
    hybrid24) timeout 560 python3 bench/hybrid.py --scale 24 --graphs rmat --sections \
                placements overhead --out "$OUT/hybrid-rmat24.json" --keep 2>&1 \
                | quiet | tail -30 ;;
    hybrid24s) timeout 400 python3 bench/hybrid.py --scale 24 --graphs rmat --sections \
                 streamed --out "$OUT/hybrid-rmat24.json" --keep 2>&1 | quiet | tail -12 ;;
    *) echo "unknown stage $what (tests, gpu, gpu24, hybrid, hybrid24, hybrid24s)"
       exit 2 ;;
  esac
done
stage done

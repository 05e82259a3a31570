#!/usr/bin/env bash
# The Python package on GPUs. Build here, run there:
#
#   scripts/gpu-python.sh prepare          (here) builds carry-python/ (git-ignored, a few MiB): the
#                                          package as a wheel for every CPython >= 3.11 (abi3, so the GPU
#                                          image's Python takes it), pytest's wheels, rshmrun,
#                                          rshmem-onstream-bench and the CUDA C++ extension example
#                                          (python/examples/cuda, built with the PyPI CUDA tools).
#   bash scripts/gpu-python.sh run         (there, from the repository root, with carry-python/ carried)
#                                          installs the wheel beside the image's torch and NumPy (the
#                                          python3 that imports both; the package on PYTHONPATH), then
#                                          runs, each step bounded and logged:
#     pytest_1pe        the pytest suite on CUDA tensors, 1 PE           (rshmrun -np 1)
#     pytest_2pe        the same, 2 PEs on the GPU(s)                    (rshmrun -np 2)
#     pytest_2nodes     the same across two simulated nodes              (rshmrun --nodes 2 -np 2)
#     cuda_kernel       python/examples/cuda/ring_cuda.py: a CUDA C++ kernel calling nvshmemx_putmem_block
#                       on rshmem tensors                                (rshmrun -np 2)
#     torchrun          python/examples/torchrun_ring.py under torchrun --nproc-per-node 2, rshmem
#                       initialized from the torch.distributed group
#     bench_1pe, bench_2pe   python/bench/overhead.sh -np 1 / -np 2: Python's cost per on-stream put and
#                       all-reduce of 4 B, 64 KiB, 16 MiB against the same Rust calls in the same run
#
# Output: $OUT (default /tmp/gpu-python-out): run.log (every step's output and exit code) and
# summary.txt (`name: value` lines: each step's status, pytest's summary lines, the benchmark's lines,
# the machine and the command). STEPS picks steps (default all, in the order above); BUDGET (seconds,
# default 540) bounds the run.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
carry=$root/carry-python
cmd=${1:-}

prepare() {
  set -e
  scripts/setup.sh >&2
  cargo build --release -p rshmem-launcher -p rshmem-examples --bin rshmrun --bin rshmem-onstream-bench >&2
  rm -rf "$carry"
  mkdir -p "$carry/wheels"
  cp target/release/rshmrun target/release/rshmem-onstream-bench "$carry/"
  strip "$carry/rshmrun" "$carry/rshmem-onstream-bench"
  python3 -m pip install -q --disable-pip-version-check "maturin>=1.7,<2" >&2
  python3 -m maturin build --release --strip --features abi3 -m python/Cargo.toml -o "$carry/wheels" >&2
  python3 -m pip download -q --disable-pip-version-check --only-binary :all: --python-version 3.12 -d "$carry/wheels" pytest >&2
  python/examples/cuda/build.sh "$carry/libring_kernel.so" sm_90 >&2
  du -sh "$carry" >&2
  echo "gpu-python.sh prepare: carry carry-python/ and run: bash scripts/gpu-python.sh run" >&2
}

run() {
  local out=${OUT:-/tmp/gpu-python-out}
  mkdir -p "$out"
  local log=$out/run.log sum=$out/summary.txt
  : >"$log"
  : >"$sum"
  local start=$SECONDS budget=${BUDGET:-540}
  note() { echo "$*" | tee -a "$sum"; }
  note "machine: $(uname -n); $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | tr -s ' ' | paste -sd ';' -)"
  note "command: bash scripts/gpu-python.sh run (STEPS=${STEPS:-all})"
  [ -d "$carry" ] || { note "error: no carry-python/ (run scripts/gpu-python.sh prepare here and carry it)"; return 1; }
  # The image's Python with torch and NumPy (KINDS.md: /opt/torch/.venv, Python 3.12); a virtual
  # environment made from another python3 would see neither. The package goes into a directory of its
  # own on PYTHONPATH (no dependencies installed: the image has them).
  local py="" c
  for c in /opt/torch/.venv/bin/python3 "$(command -v python3)"; do
    if [ -x "$c" ] && "$c" -c 'import torch, numpy' >/dev/null 2>&1; then py=$c; break; fi
  done
  [ -n "$py" ] || py=$(command -v python3)
  local site=/tmp/rshmem-site
  rm -rf "$site"
  "$py" -m pip install -q --disable-pip-version-check --no-deps --no-index --target "$site" "$carry"/wheels/rshmem-*.whl >>"$log" 2>&1
  PYTHONPATH=$site "$py" -c 'import pytest' 2>/dev/null || "$py" -m pip install -q --disable-pip-version-check --no-index --find-links "$carry/wheels" --target "$site" pytest >>"$log" 2>&1
  export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
  note "python: $("$py" -c 'import sys, rshmem, torch; print(sys.version.split()[0], "rshmem", rshmem.__file__, "torch", torch.__version__, "gpus", torch.cuda.device_count())' 2>&1 | tail -1)"
  # RSHMEM_BACKEND=cpu makes a dry run of the steps on a machine without a GPU.
  export RSHMEM_BACKEND=${RSHMEM_BACKEND:-cuda} RSHMEM_WAIT_TIMEOUT=120 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  local rshmrun=$carry/rshmrun
  step() {  # step NAME TIMEOUT COMMAND...
    local name=$1 t=$2; shift 2
    case " ${STEPS:-all} " in *" all "* | *" $name "*) ;; *) return 0 ;; esac
    local left=$((budget - (SECONDS - start)))
    if [ "$left" -lt 20 ]; then note "$name: skipped (budget spent)"; return 0; fi
    [ "$t" -gt "$left" ] && t=$left
    echo "=== $name: $*" >>"$log"
    local t0=$SECONDS rc
    timeout "$t" "$@" >"$out/$name.log" 2>&1
    rc=$?
    cat "$out/$name.log" >>"$log"
    note "$name: exit $rc in $((SECONDS - t0)) s"
    grep -E '^\[pe 0\] [0-9]+ (passed|failed)' "$out/$name.log" | sed "s/^\[pe 0\] /$name.pytest: /" | tee -a "$sum"
  }
  local pytest=("$py" -m pytest -q -rfEsxX -p no:cacheprovider python/tests)
  step pytest_1pe 150 "$rshmrun" -np 1 --timeout 140 "${pytest[@]}"
  step pytest_2pe 180 "$rshmrun" -np 2 --timeout 170 "${pytest[@]}"
  step pytest_2nodes 180 "$rshmrun" --nodes 2 -np 2 --timeout 170 "${pytest[@]}"
  RING_KERNEL_LIB=$carry/libring_kernel.so step cuda_kernel 60 "$rshmrun" -np 2 --timeout 50 "$py" python/examples/cuda/ring_cuda.py
  grep -h ': ok$\|WRONG' "$out/cuda_kernel.log" 2>/dev/null | sed 's/^/cuda_kernel.out: /' | tee -a "$sum"
  step torchrun 90 "$py" -m torch.distributed.run --nproc-per-node 2 python/examples/torchrun_ring.py
  grep -h 'ring and all-reduce' "$out/torchrun.log" 2>/dev/null | sed 's/^/torchrun.out: /' | tee -a "$sum"
  for np in 1 2; do
    RSHMRUN=$rshmrun ONSTREAM_BENCH=$carry/rshmem-onstream-bench PYTHON=$py step "bench_${np}pe" 120 python/bench/overhead.sh -np "$np"
    grep -E '^(rust|python|overhead|ratio)\.' "$out/bench_${np}pe.log" 2>/dev/null | sed "s/^/bench_${np}pe./" | tee -a "$sum"
  done
  echo "gpu-python.sh: $out/summary.txt" >&2
}

case "$cmd" in
  prepare) prepare ;;
  run) run ;;
  *) echo "usage: $0 prepare|run" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# Checks the Python package the way a user gets it (scripts/test.sh runs this after the Rust tests,
# whose tests/tests/python.rs runs the pytest suite on the workspace's build):
#  1. installs it with scripts/install-python.sh (pip install ./python: maturin builds the runtime)
#     into a fresh virtual environment, target/python-venv (which sees the system's NumPy and torch);
#  2. runs the README's example, python/examples/ring.py, with that environment's python under rshmrun
#     (-np 2, -np 3, --nodes 2 -np 4): every PE must report ok;
#     and python/examples/torchrun_ring.py under torchrun (rshmem.init(process_group=...), gloo);
#  3. checks that the wheel installed the type stubs (__init__.pyi, _rshmem.pyi, py.typed);
#  4. builds the CUDA C++ extension example (python/examples/cuda/build.sh: nvcc against nvshmem.h,
#     device-linked with librshmem_device.a; no GPU needed) and loads it with ctypes after
#     `import rshmem`: its calls into the runtime resolve to the rshmem module's;
#  5. runs the overhead benchmark (python/bench/overhead.sh --quick) and checks its `name: value`
#     lines (on the CPU backend here: the numbers mean nothing, the script must work).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
log() { echo "check-python: $*" >&2; }
die() { printf 'check-python: FAILED: %b\n' "$*" >&2; exit 1; }
venv=$root/target/python-venv
rm -rf "$venv"
python3 -m venv --system-site-packages "$venv" || die "python3 -m venv failed (apt-get install python3-venv)"
py=$venv/bin/python
PYTHON=$py scripts/install-python.sh >&2 || die "scripts/install-python.sh failed"
where=$("$py" -c 'import rshmem, os; print(os.path.dirname(rshmem.__file__))')
case "$where" in "$venv"/*) ;; *) die "rshmem imports from $where, not from the virtual environment" ;; esac
log "installed in $where"

rshmrun=$root/target/release/rshmrun
for launch in "-np 2" "-np 3" "--nodes 2 -np 4"; do
  # shellcheck disable=SC2086
  out=$(RSHMEM_BACKEND=cpu "$rshmrun" $launch --timeout 120 "$py" python/examples/ring.py 2>&1) || die "ring.py under rshmrun $launch:\n$out"
  np=${launch##* }
  oks=$(grep -c ': ok$' <<<"$out" || true)
  [ "$oks" = "$np" ] || die "ring.py under rshmrun $launch: $oks of $np PEs reported ok:\n$out"
  log "ok: ring.py under rshmrun $launch"
done

if "$py" -c 'import torch' 2>/dev/null; then
  out=$(RSHMEM_BACKEND=cpu timeout 300 "$py" -m torch.distributed.run --nproc-per-node 2 python/examples/torchrun_ring.py 2>&1) \
    || die "torchrun --nproc-per-node 2 python/examples/torchrun_ring.py:\n$out"
  [ "$(grep -o 'ring and all-reduce ok' <<<"$out" | wc -l)" = 2 ] || die "torchrun_ring.py: not every rank reported ok:\n$out"
  log "ok: torchrun --nproc-per-node 2 with rshmem.init(process_group=...)"
elif [ "${RSHMEM_TEST_NO_SKIP:-0}" != 0 ]; then
  die "no torch in $py (scripts/setup.sh installs it): the torchrun example cannot run"
else
  log "SKIPPED the torchrun example: no torch in $py"
fi

for f in __init__.pyi _rshmem.pyi py.typed; do
  [ -f "$where/$f" ] || die "the installed package lacks $f"
done
log "ok: type stubs installed"

so=$root/target/python-cuda-example/libring_kernel.so
python/examples/cuda/build.sh "$so" >&2 || die "python/examples/cuda/build.sh failed"
"$py" - "$so" <<'PY' || die "the CUDA extension example does not load beside rshmem"
import ctypes, sys
try:
    ctypes.CDLL(sys.argv[1])
    sys.exit("it loaded without rshmem: it should take the runtime's calls from the rshmem module")
except OSError as e:
    assert "rshmemi_register_device_state" in str(e), e
import rshmem
lib = ctypes.CDLL(sys.argv[1])
assert lib.ring_bind and lib.ring_launch
PY
log "ok: the CUDA C++ extension builds, device-links and loads after import rshmem"

out=$(RSHMEM_BACKEND=cpu PYTHON=$py python/bench/overhead.sh --quick 2>&1) || die "python/bench/overhead.sh --quick:\n$out"
for op in put allreduce; do
  for size in 4B 64KiB 16MiB; do
    for want in "rust.$op.$size.issue_us" "python.$op.$size.issue_us" "overhead.$op.$size.issue_us" "ratio.$op.$size.GBps"; do
      grep -q "^$want: -\?[0-9]" <<<"$out" || die "overhead.sh printed no '$want: value' line:\n$out"
    done
  done
done
log "ok: python/bench/overhead.sh"
echo "check-python: all checks passed"

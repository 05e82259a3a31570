#!/usr/bin/env bash
# The cost Python adds to an on-stream put and an all-reduce of 4 B, 64 KiB and 16 MiB, against the
# same calls from Rust in the same run (same job shape, same machine), one command:
#   python/bench/overhead.sh [-np 2] [--quick] [rshmrun options...]
# Runs target/release/rshmem-onstream-bench and python/bench/overhead.py under rshmrun (default -np 2;
# on one GPU both PEs share it), then prints every `name: value` line of both and, per operation and
# size, `overhead.OP.SIZE.issue_us` (Python's issue time minus Rust's: what Python adds per call) and
# `ratio.OP.SIZE.GBps` (Python's bandwidth over Rust's). Needs the package installed
# (scripts/install-python.sh) and the workspace built (cargo build --release); RSHMRUN and
# ONSTREAM_BENCH name the two binaries elsewhere (scripts/gpu-python.sh carries them), PYTHON the
# interpreter.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-python3}
quick=() launch=()
for a in "$@"; do
  if [ "$a" = --quick ]; then quick=(--quick); else launch+=("$a"); fi
done
[ ${#launch[@]} -gt 0 ] || launch=(-np 2)
rshmrun=${RSHMRUN:-$root/target/release/rshmrun}
bench=${ONSTREAM_BENCH:-$root/target/release/rshmem-onstream-bench}
[ -x "$rshmrun" ] && [ -x "$bench" ] || (cd "$root" && cargo build --release -q -p rshmem-launcher -p rshmem-examples --bin rshmrun --bin rshmem-onstream-bench)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "machine: $(uname -n) $(nproc) cores; $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || echo 'no GPU')"
echo "command: $0 $*"
"$rshmrun" "${launch[@]}" "$bench" "${quick[@]}" | sed -n 's/^\[pe 0\] //p' | tee "$tmp/rust"
"$rshmrun" "${launch[@]}" "$py" "$root/python/bench/overhead.py" "${quick[@]}" | sed -n 's/^\[pe 0\] //p' | tee "$tmp/python"
"$py" - "$tmp/rust" "$tmp/python" <<'PY'
import sys
def read(path, prefix):
    out = {}
    for line in open(path):
        name, _, value = line.partition(": ")
        if name.startswith(prefix):
            try:
                out[name[len(prefix):]] = float(value)
            except ValueError:
                pass
    return out
rust, python = read(sys.argv[1], "rust."), read(sys.argv[2], "python.")
for key in sorted(k for k in rust if k.endswith(".issue_us") and k in python):
    print(f"overhead.{key}: {python[key] - rust[key]:.3f}")
# Bandwidth ratio from the per-call times (the GBps lines are rounded; the bytes are the same).
for key in sorted(k for k in rust if k.endswith(".per_call_us") and k in python):
    base = key[: -len(".per_call_us")]
    print(f"ratio.{base}.GBps: {rust[key] / python[key]:.3f}" if python[key] else f"ratio.{base}.GBps: nan")
PY

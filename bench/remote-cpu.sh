#!/usr/bin/env bash
# The remote engine on the CPU backend, two simulated nodes (`rshmrun --nodes 2 -np 2`, the proxy),
# in one run, next to the loopback TCP bound measured by a compiled program in the same run:
#   - rshmem-loopback: bandwidth of 1, 4 and 8 streams, and the 8-byte round trip;
#   - message rate: thread 0 of 1, 4 and 32 blocks puts 8 B, 64 B, 512 B and 4 KiB (and p of 8 B), then
#     one quiet per block (rshmem-bench --cases rate, 200000 operations per launch, median of 5);
#   - byte rate: puts of 64 KiB to 4 MiB from one block (rshmem-bench --cases bw);
#   - the stage counters of the rate run (RSHMEM_PROXY_STATS).
# Prints everything, then `name: value` lines: cpu_remote_put8_mops (8-byte puts, 32 blocks),
# cpu_remote_put8_mops_1block, cpu_remote_rate_32_over_1_min (32 blocks over 1 block, the smallest
# ratio over the sizes), cpu_loopback_gbps_{1,4,8}, cpu_loopback_rtt_us. Run from the repository root
# after `cargo build --release --workspace`.
set -uo pipefail
cd "$(dirname "$0")/.."
T=target/release
out=$(mktemp -d)
echo "# $(date -u +%FT%TZ) $(nproc) CPUs; load average: $(cut -d' ' -f1-3 /proc/loadavg); commit $(git rev-parse --short HEAD)"
"$T/rshmem-loopback" --streams 1,4,8 --bytes 512m | tee "$out/loopback.txt"
# Each PE on CPUs of its own (--bind-to core): unbound, the scheduler put both PEs' busy threads on one
# CPU at times and a case swung between 0.4 and 1.0 M puts/s from run to run (2026-12-07-cpu.md).
# BIND=none measures unbound.
R=("$T/rshmrun" --nodes 2 -np 2 --timeout 300 --bind-to "${BIND:-core}")
export RSHMEM_BACKEND=cpu RSHMEM_REMOTE_TRANSPORT=proxy
RSHMEM_PROXY_STATS=1 "${R[@]}" "$T/rshmem-bench" --cases rate --rate-grids 1,4,32 --rate-sizes 8,64,512,4k --rate-ops 200000 2>&1 | tee "$out/rate.txt" | grep -v '^\[pe [01]\] #'
"${R[@]}" "$T/rshmem-bench" --cases bw --max-bytes 4m 2>&1 | tee "$out/bw.txt" | grep -E "put_bw scope=thread bytes=(65536|131072|524288|2097152) "
python3 - "$out" <<'PY'
import re, sys, os
d = sys.argv[1]
rate = open(os.path.join(d, "rate.txt")).read()
r = {}
for m in re.finditer(r"case=msg_rate_put scope=thread bytes=(\d+) grid=(\d+) threads=1 value=([0-9.]+)", rate):
    r[(int(m.group(1)), int(m.group(2)))] = float(m.group(3))
def show(k, v):
    print(f"{k}: {v}")
show("cpu_remote_put8_mops", r.get((8, 32), "n/a"))
show("cpu_remote_put8_mops_1block", r.get((8, 1), "n/a"))
ratios = [r[(s, 32)] / r[(s, 1)] for s in (8, 64, 512, 4096) if (s, 32) in r and (s, 1) in r]
show("cpu_remote_rate_32_over_1_min", f"{min(ratios):.3f}" if ratios else "n/a")
lb = open(os.path.join(d, "loopback.txt")).read()
for m in re.finditer(r"loopback_bw streams=(\d+) GBps=([0-9.]+)", lb):
    show(f"cpu_loopback_gbps_{m.group(1)}", m.group(2))
m = re.search(r"loopback_rtt mode=poll us=([0-9.]+)", lb)
show("cpu_loopback_rtt_us", m.group(1) if m else "n/a")
PY
rm -rf "$out"

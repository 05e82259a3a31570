#!/usr/bin/env bash
# What limits the rows still below target (issues 20 and 23), in one device call, from the repository
# root with carry/ (and carry-before/) present:
#   OUT=dir scripts/gpu-why.sh [PARTS]      PARTS: any of ab ab-rotate ncu-bench ncu-perftest ncu-coll
#                                           ncu-latency perftest grid-sweep host (default: ab ncu-bench
#                                           ncu-perftest perftest host)
# - ab:           ROUNDS=3 scripts/gpu-p2p-ab.sh before=$AB_BEFORE now=carry (the P2P rows of Rust kernels;
#                 AB_BEFORE default carry-before)
# - ab-rotate:    the same with --rotate-bytes 128m (every round of a row on lines no cache holds); the
#                 before build must know the option (deaba1f does not: carry/before2 is deaba1f with it)
# - ncu-bench:    ncu on PE 0's bench_bw launch of the block put at 512 KiB and the block get at 8 MiB
#                 (132 x 256, --quick --max-bytes 8m --cases bw), for carry-before/ and carry/: the first
#                 timed launch of each row, counted from the bench's order of rows (SKIP_* below)
# - ncu-perftest: ncu on the first timed launch (1 KiB) of NVSHMEM's shmem_p_bw and shmem_g_bw, linked
#                 against each library
# - perftest:     those two and host/pt-to-pt/bw under both libraries (scripts/gpu-perftest.sh)
# - ncu-coll:     ncu on one PE's on-stream collective kernel (reducescatter, broadcast, fcollect at
#                 4 B-4 KiB), with every warp stall reason; NVSHMEM launches no kernel on one PE
# - ncu-latency:  ncu on the block-scope 4-byte launch of shmem_put_latency and shmem_get_latency,
#                 under each library
# - grid-sweep:   the five on-stream collective perftests under RSHMEM_ONSTREAM_GRID_MIN = 8k, 64k, 1m,
#                 each scored against one NVSHMEM run
# - host:         rshmem-bench --cases host (the on-stream enqueue rows, host_enqueue_us / stream_copy_us)
# Logs and tables in OUT (default /tmp/why); the key lines on stdout.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${OUT:-/tmp/why}; mkdir -p "$out"
parts=${*:-ab ncu-bench ncu-perftest perftest host}
has() { case " $parts " in *" $1 "*) return 0 ;; esac; return 1; }
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 RSHMEM_SYMMETRIC_SIZE=${RSHMEM_SYMMETRIC_SIZE:-256m}
bash scripts/gpu-unpack.sh carry carry-before >/dev/null
t0=$SECONDS
stamp() { echo "## $1 ($((SECONDS - t0)) s)"; }
bench=(--grid 132 --threads 256 --quick --max-bytes 8m --cases bw)
# bench_bw launches of PE 0 in that run, 1 warm-up + 3 timed per row, rows in the order put/get x
# thread/warp/block x size. Sizes: 8, 128, 2 Ki, 32 Ki, 64 Ki, 512 Ki, 8 Mi; carry/'s block rows add
# 8 Ki and 16 Ki (DEEP_SIZES), deaba1f's do not.
SKIP_PUT512K_BEFORE=77 SKIP_PUT512K_NOW=85 SKIP_GET8M_BEFORE=165 SKIP_GET8M_NOW=181
before=${AB_BEFORE:-carry-before}
# Every warp stall reason, per issued instruction (ncu-coll, ncu-latency).
stalls='regex:^smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active\.ratio$'
if has ab; then
  stamp "ab ($before against carry)"
  ROUNDS=3 OUT=$out/ab timeout 200 bash scripts/gpu-p2p-ab.sh before=$before now=carry | grep -E "^\| (put|get)_bw \| block"
fi
if has ab-rotate; then
  # The same rows with every round on fresh lines (--rotate-bytes 128m, beyond the 50-60 MB L2).
  stamp "ab-rotate ($before against carry, --rotate-bytes 128m)"
  ROUNDS=3 OUT=$out/ab-rotate timeout 250 bash scripts/gpu-p2p-ab.sh before=$before now=carry -- "${bench[@]}" --rotate-bytes 128m | grep -E "^\| (put|get)_bw \| block"
fi
if has ncu-bench; then
  stamp "ncu-bench"
  for b in before now; do
    d=carry; [ $b = before ] && d=carry-before
    eval "sp=\$SKIP_PUT512K_${b^^}; sg=\$SKIP_GET8M_${b^^}"
    RSHMRUN=$d/rshmrun LIBDIR=$d OUT=$out T=120 bash scripts/gpu-ncu.sh "bench_${b}_put512k" bench_bw "$sp" -- "$d/rshmem-bench" "${bench[@]}"
    RSHMRUN=$d/rshmrun LIBDIR=$d OUT=$out T=120 bash scripts/gpu-ncu.sh "bench_${b}_get8m" bench_bw "$sg" -- "$d/rshmem-bench" "${bench[@]}"
  done
fi
if [ -f carry/perftest-pre.tar.xz ]; then
  DRY_RUN=1 OUT=$out bash scripts/gpu-perftest.sh run >/dev/null 2>&1
fi
nv_home=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])" 2>/dev/null)
if has ncu-perftest; then
  stamp "ncu-perftest"
  for p in shmem_p_bw shmem_g_bw; do
    args=$(head -1 "carry/perftest-cmp/args/device/pt-to-pt/$p.args" | sed -E 's/-n [0-9]+/-n 20/; s/-w [0-9]+/-w 5/')
    # shellcheck disable=SC2086 # an argument line is a list of words
    LIBDIR=carry OUT=$out T=90 bash scripts/gpu-ncu.sh "${p}_rshmem" bw 1 -- "carry/perftest-cmp/rshmem/device/pt-to-pt/$p" $args
    # shellcheck disable=SC2086
    LIBDIR=$nv_home/lib OUT=$out T=90 bash scripts/gpu-ncu.sh "${p}_nvshmem" bw 1 --pmi -- "carry/perftest-cmp/nvshmem/device/pt-to-pt/$p" $args
  done
fi
if has perftest; then
  stamp "perftest"
  PERFTEST_PROGS="host/pt-to-pt/bw device/pt-to-pt/shmem_p_bw device/pt-to-pt/shmem_g_bw" PERFTEST_OUT=$out/pt BUDGET=150 T=40 \
    bash scripts/gpu-perftest.sh run 2>&1 | grep -E "^\| (bw|shmem_[pg]_bw) "
  tar -xzf "$out/pt/perftest-logs.tar.gz" -C "$out/pt" 2>/dev/null
  grep -h -A14 "Bandwidth\|^#" "$out"/pt/logs/*/bw.log 2>/dev/null | grep -E "^#|^ *[0-9]+ +[0-9.]+" | head -40
fi
if has ncu-coll; then
  # One on-stream collective kernel of each library on ONE PE (no partner to wait for, so ncu may
  # replay it): its duration, instructions and where its warps stall (the .1 rows' limit).
  stamp "ncu-coll"
  for p in reducescatter_on_stream broadcast_on_stream fcollect_on_stream; do
    NP=1 LIBDIR=carry OUT=$out T=60 METRICS_EXTRA=$stalls bash scripts/gpu-ncu.sh "coll_${p}_rshmem" rshmemi_collective 40 -- "carry/perftest-cmp/rshmem/host/coll/$p" -n 20 -w 5 -b 4 -e 4k
    NP=1 LIBDIR=$nv_home/lib OUT=$out T=60 METRICS_EXTRA=$stalls bash scripts/gpu-ncu.sh "coll_${p}_nvshmem" regex:on_stream_kernel 40 --pmi -- "carry/perftest-cmp/nvshmem/host/coll/$p" -n 20 -w 5 -b 4 -e 4k
  done
fi
if has ncu-latency; then
  # The block-scope 4-byte rows of shmem_put_latency and shmem_get_latency (one block of 1024 threads:
  # a block put or get, then thread 0 quiets between two block barriers): their first timed launch
  # under each library. The kernels wait for no other PE.
  stamp "ncu-latency"
  for p in shmem_put_latency shmem_get_latency; do
    LIBDIR=carry OUT=$out T=60 METRICS_EXTRA=$stalls bash scripts/gpu-ncu.sh "lat_${p}_rshmem" latency_kern_block 1 -- "carry/perftest-cmp/rshmem/device/pt-to-pt/$p" -e 4 -t 1024 -n 20 -w 5
    LIBDIR=$nv_home/lib OUT=$out T=60 METRICS_EXTRA=$stalls bash scripts/gpu-ncu.sh "lat_${p}_nvshmem" latency_kern_block 1 --pmi -- "carry/perftest-cmp/nvshmem/device/pt-to-pt/$p" -e 4 -t 1024 -n 20 -w 5
  done
fi
if has grid-sweep; then
  # Issue 20's on-stream collectives under three settings of RSHMEM_ONSTREAM_GRID_MIN (8k: every size
  # above 8 KiB in three kernels, as the default 0 does; 64k; 1m), NVSHMEM once, each
  # rshmem set scored against the same NVSHMEM logs.
  stamp "grid-sweep"
  cmp=carry/perftest-cmp
  progs="host/coll/reduction_on_stream host/coll/broadcast_on_stream host/coll/fcollect_on_stream host/coll/alltoall_on_stream host/coll/reducescatter_on_stream"
  rm -rf "$cmp/logs"
  LIBS=nvshmem PROGS=$progs SHORT=1 T=40 BUDGET=200 bash bench/perftest-run.sh "$cmp" >/dev/null 2>&1
  mkdir -p "$out/sweep"; cp -r "$cmp/logs/nvshmem" "$out/sweep/nvshmem"
  for g in 8k 64k 1m; do
    rm -rf "$cmp/logs/rshmem"; mkdir -p "$cmp/logs/rshmem"
    RSHMEM_ONSTREAM_GRID_MIN=$g LIBS=rshmem PROGS=$progs SHORT=1 T=40 BUDGET=150 bash bench/perftest-run.sh "$cmp" >"$out/sweep/score_$g.md" 2>&1
    cp -r "$cmp/logs/rshmem" "$out/sweep/rshmem_$g"
    echo "RSHMEM_ONSTREAM_GRID_MIN=$g:"; grep -E "^\| [a-z]+_on_stream" "$out/sweep/score_$g.md"
  done
fi
if has host; then
  stamp "host"
  LD_LIBRARY_PATH=carry:${LD_LIBRARY_PATH:-} timeout 150 carry/rshmrun -np 2 --timeout 120 carry/rshmem-bench --grid 132 --threads 256 --quick --max-bytes 64m --cases host >"$out/host.log" 2>&1
  echo "host: exit $?"; grep -E "RESULT" "$out/host.log" | grep -E "enqueue|stream_copy|stream_put|host_put" 
fi
stamp "done"

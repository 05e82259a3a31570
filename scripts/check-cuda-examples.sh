#!/usr/bin/env bash
# Checks the CUDA C/C++ side of rshmem without a GPU, or (MODE=full, on a GPU machine) links it:
#   scripts/check-cuda-examples.sh [OUTDIR]              compile + device-link checks (CI, no GPU)
#   MODE=full scripts/check-cuda-examples.sh OUTDIR      also links executables into OUTDIR:
#                                                        ring_shift_cuda, simple_shift, nvshmem_api_coverage
# Environment:
#   SEED=path      the NVSHMEM seed program, compiled unchanged (default: $root/../shared/seeds/simple_shift.cu,
#                  as CI's checkout has beside it, then OUTDIR/simple_shift.cu). Optional: without it the
#                  summary says in one line that the seed check was skipped; examples/cuda/ring_shift.cu
#                  covers the same compile + device-link path in every run. A SEED that names no file is
#                  an error.
#   PTX=path       use this device-library PTX instead of building it (default: build it with
#                  scripts/build-ptx.sh; with MODE=full, OUTDIR/rshmem_device.ptx when present)
#   ARCH=sm_90     GPU architecture
#   RSHMEM_LIBDIR  where librshmem.so is for MODE=full (default: OUTDIR when it has one, else target/release)
#   NVCC           nvcc to use (default: PATH, then $CUDA_HOME/bin, then scripts/install-cuda-tools.sh)
# Intermediate files go to target/cuda-check (or OUTDIR in the default mode when given).
#
# The commands, for the README (D = the work directory; -I device/include is rshmem.h / nvshmem.h / nvshmemx.h):
#   1. device library PTX, assembled:
#        scripts/build-ptx.sh rshmem-device D/rshmem_device.ptx sm_90
#        ptxas -arch=sm_90 -c D/rshmem_device.ptx -o D/rshmem_device.cubin
#   2. device library archive (scripts/build-device-lib.sh D/rshmem_device.ptx D sm_90):
#        nvcc -arch=sm_90 -rdc=true -Xcompiler -fPIC -maxrregcount=64 -c D/rshmem_device.ptx -o rshmem_device_ptx.o
#        nvcc -arch=sm_90 -rdc=true -O2 -Xcompiler -fPIC -c device/cuda/rshmem_device_init.cu -I device/include -o rshmem_device_init.o
#        nvcc -lib rshmem_device_ptx.o rshmem_device_init.o -o D/librshmem_device.a
#   3. each program (examples/cuda/ring_shift.cu against rshmem.h; $SEED against nvshmem.h, unchanged;
#      tests/cuda/nvshmem_api_coverage.cu against nvshmem.h/nvshmemx.h):
#        nvcc -rdc=true -arch=sm_90 -O2 -I device/include -c PROG.cu -o D/PROG.o --keep --keep-dir D/keep-PROG
#        nvcc -arch=sm_90 -dlink D/PROG.o D/librshmem_device.a -o D/PROG_dlink.o -Xnvlink --verbose
#      The device link fails on any rshmem_* device function the archive does not define. The PTX that
#      --keep leaves is compared with the device library's: every called function must exist with the same
#      parameter and return widths, and the coverage test must call every function the library exports.
#      From nvlink's report, the coverage kernel that calls every device-library function must use at most
#      64 registers (so kernels calling rshmem can launch 1024 threads per block).
#   4. MODE=full only, the executable (nvcc does the device link itself):
#        nvcc -rdc=true -arch=sm_90 D/PROG.o D/librshmem_device.a -L target/release -lrshmem -lcuda \
#             -Xlinker -rpath -Xlinker target/release -o OUTDIR/PROG
#      (-lcuda is left out where no libcuda.so exists, e.g. on a machine without a driver: these programs
#      make no driver API calls themselves and the CUDA runtime loads libcuda at run time. With the PyPI
#      tools, -L <cuda>/lib is added: nvcc.profile looks for libcudart_static.a in lib64/ only.)
#   Also: a program calling an undefined rshmem_* device function must fail the device link (self-test of
#   step 3), and rshmem.h / nvshmem.h / nvshmemx.h must compile as host-only C (gcc -std=c99) and C++ (g++).
#   With NVSHMEM_SRC=<checkout of NVIDIA/nvshmem>: NVSHMEM's perftests, unchanged, compile and device-link
#   (bench/perftest.sh, in check mode).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${MODE:-check}
arch=${ARCH:-sm_90}
case "$mode" in check | full) ;; *) echo "check-cuda-examples: MODE must be check or full, not '$mode'" >&2; exit 2 ;; esac
if [ "$mode" = full ] && [ $# -lt 1 ]; then
  echo "usage: MODE=full $0 OUTDIR" >&2
  exit 2
fi
outdir=${1:-}
if [ -n "$outdir" ]; then mkdir -p "$outdir" && outdir=$(cd "$outdir" && pwd); fi
if [ "$mode" = check ] && [ -n "$outdir" ]; then work=$outdir; else work=$root/target/cuda-check; fi
mkdir -p "$work"
inc=$root/device/include

die() { echo "check-cuda-examples: FAILED: $*" >&2; exit 1; }
log() { echo "check-cuda-examples: $*" >&2; }
run() { echo "+ $*" >&2; "$@"; }
checked=() failed=() skipped=()
ok() { checked+=("$1"); log "ok: $1"; }
bad() { failed+=("$1"); log "FAILED: $1"; }

# ---------------------------------------------------------------- tools
nvcc=$("$root/scripts/find-nvcc.sh") || die "no usable nvcc"
cuda_bin=$(dirname "$nvcc")
ptxas=$cuda_bin/ptxas
[ -x "$ptxas" ] || ptxas=$(command -v ptxas) || die "ptxas not found next to $nvcc"
command -v python3 >/dev/null 2>&1 || die "python3 is needed for the PTX signature check"
export NVCC=$nvcc # for build-device-lib.sh
log "mode $mode, arch $arch, nvcc $nvcc ($("$nvcc" --version | tail -1))"

# ---------------------------------------------------------------- 1. device library PTX
ptx=${PTX:-}
if [ -z "$ptx" ] && [ "$mode" = full ] && [ -f "$outdir/rshmem_device.ptx" ]; then ptx=$outdir/rshmem_device.ptx; fi
if [ -z "$ptx" ]; then
  command -v cargo >/dev/null 2>&1 || die "no cargo here to build the PTX: pass PTX=path (or put rshmem_device.ptx in OUTDIR)"
  ptx=$work/rshmem_device.ptx
  rm -f "$ptx"
  if ! run "$root/scripts/build-ptx.sh" rshmem-device "$ptx" "$arch" >/dev/null 2>"$work/build-ptx.err"; then
    cat "$work/build-ptx.err" >&2
    # build-ptx.sh deletes the previous .s and cargo then sees nothing to rebuild: clean the crate, retry.
    if grep -q "cannot access" "$work/build-ptx.err"; then
      log "build-ptx.sh found no fresh .s (cargo saw nothing to rebuild): cleaning rshmem-device's PTX build and retrying"
      CARGO_TARGET_DIR="$root/target/ptx-$arch" cargo +nightly clean -q -p rshmem-device --release \
        --target nvptx64-nvidia-cuda --manifest-path "$root/Cargo.toml" >&2 || true
      run "$root/scripts/build-ptx.sh" rshmem-device "$ptx" "$arch" >/dev/null || die "scripts/build-ptx.sh rshmem-device"
    else
      die "scripts/build-ptx.sh rshmem-device"
    fi
  fi
fi
[ -s "$ptx" ] || die "PTX '$ptx' missing or empty"
ok "device library PTX: $ptx ($(grep -c '^\.visible \.func' "$ptx") exported device functions)"

run "$ptxas" -arch="$arch" -c "$ptx" -o "$work/rshmem_device.cubin" || die "ptxas -arch=$arch -c $ptx"
ok "ptxas -arch=$arch -c assembles the device library"

# ---------------------------------------------------------------- 2. device library archive
run "$root/scripts/build-device-lib.sh" "$ptx" "$work" "$arch" >/dev/null || die "scripts/build-device-lib.sh"
lib=$work/librshmem_device.a
ok "device library archive: $lib"

# ---------------------------------------------------------------- host-only header checks
hdr_test=$work/headers_host_only.c
cat >"$hdr_test" <<'EOF'
/* Host-only use of rshmem's headers, without CUDA. */
#include <rshmem.h>
#include <nvshmem.h>
#include <nvshmemx.h>
int headers_host_only(void);
int headers_host_only(void) {
    nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
    nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
    int *p;
    nvshmemx_get_uniqueid(&id);
    nvshmemx_set_attr_uniqueid_args(0, 1, &id, &attr);
    nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr);
    p = (int *)nvshmem_malloc(sizeof(int));
    nvshmem_int_p(p, nvshmem_my_pe(), (nvshmem_my_pe() + 1) % nvshmem_n_pes());
    nvshmemx_barrier_all_on_stream(0);
    rshmem_barrier_all();
    {
        /* Teams and collectives from C: the host calls and the on-stream forms. */
        nvshmem_team_config_t config = NVSHMEM_TEAM_CONFIG_INITIALIZER;
        nvshmem_team_t team = NVSHMEM_TEAM_INVALID, x, y;
        long *q = (long *)nvshmem_malloc(16 * sizeof(long));
        int rc = nvshmem_team_split_strided(NVSHMEM_TEAM_WORLD, 0, 1, nvshmem_n_pes(), &config,
                                            NVSHMEM_TEAM_CONFIG_MASK_NUM_CONTEXTS, &team);
        rc += nvshmem_team_split_2d(NVSHMEM_TEAM_WORLD, 2, NULL, 0, &x, NULL, 0, &y);
        nvshmem_team_get_config(team, &config);
        rc += nvshmem_barrier(team) + nvshmem_sync(team) + nvshmemx_team_sync_on_stream(team, 0);
        rc += nvshmem_long_broadcast(team, q, q + 1, 1, 0) + nvshmem_char_fcollect(team, (char *)q, (char *)q, 1);
        rc += nvshmem_long_sum_reduce(team, q, q + 8, 1) + nvshmem_uint64_xor_reducescatter(team, (uint64_t *)q,
                                                                                           (uint64_t *)q, 1);
        rc += nvshmemx_double_max_reduce_on_stream(team, (double *)q, (double *)q + 1, 1, 0);
        rc += nvshmemx_alltoallmem_on_stream(team, q, q + 4, 8, 0) + nvshmem_team_translate_pe(team, 0, x);
        nvshmem_team_destroy(y);
        nvshmem_team_destroy(x);
        nvshmem_team_destroy(team);
#if defined(__cplusplus) && defined(NVSHMEMI_HAVE_CUDA_TYPES)
        /* Host C++ with the CUDA headers: the CUDA types' collectives too. */
        rc += nvshmem_half_sum_reduce(team, (half *)q, (half *)q, 1) + nvshmem_bfloat16_broadcast(team, (__nv_bfloat16 *)q, (__nv_bfloat16 *)q, 1, 0);
        rc += nvshmemx_double2_maxloc_reduce_on_stream(team, (double2 *)q, (double2 *)q, 1, (cudaStream_t)0);
#endif
        nvshmem_free(q);
        if (rc) return rc;
    }
    nvshmem_free(p);
    return nvshmem_int_g(p, 0) + nvshmem_team_my_pe(NVSHMEMX_TEAM_NODE) + RSHMEM_CMP_GE;
}
EOF
if command -v gcc >/dev/null 2>&1; then
  if run gcc -std=c99 -Wall -Wextra -pedantic -Werror -I "$inc" -c "$hdr_test" -o "$work/headers_host_only_c.o"; then
    ok "headers compile as host-only C (gcc -std=c99 -pedantic -Werror)"
  else bad "headers as host-only C (gcc)"; fi
else log "no gcc: skipping the host-only C header check"; fi
if command -v g++ >/dev/null 2>&1; then
  if run g++ -std=c++11 -Wall -Wextra -Werror -x c++ -I "$inc" -c "$hdr_test" -o "$work/headers_host_only_cxx.o"; then
    ok "headers compile as host-only C++ (g++ -std=c++11 -Werror)"
  else bad "headers as host-only C++ (g++)"; fi
  # Host C++ with the CUDA headers on the include path (NVSHMEM's host .cpp programs): nvshmem.h then
  # brings in the CUDA types, and the half / bfloat16 / double2 collectives with them.
  cuda_inc=$(cd "$cuda_bin/../include" && pwd)
  if run g++ -std=c++17 -Wall -Wextra -Werror -x c++ -I "$inc" -I "$cuda_inc" -c "$hdr_test" \
    -o "$work/headers_host_cuda_cxx.o"; then
    ok "headers compile as host C++ with the CUDA headers (g++ -std=c++17 -Werror, CUDA types in)"
  else bad "headers as host C++ with the CUDA headers (g++)"; fi
else log "no g++: skipping the host-only C++ header check"; fi

# ---------------------------------------------------------------- 3. programs
# The NVSHMEM seed program: SEED when given (it must exist), else beside the checkout (CI has
# ../shared/seeds/), else in OUTDIR; none of them is fine: its check is skipped, saying so once.
if [ -n "${SEED:-}" ]; then
  [ -f "$SEED" ] || die "SEED='$SEED': no such file (the NVSHMEM seed program simple_shift.cu)"
  seed=$SEED
else
  seed=
  for f in "$root/../shared/seeds/simple_shift.cu" ${outdir:+"$outdir/simple_shift.cu"}; do
    if [ -f "$f" ]; then seed=$f && break; fi
  done
fi

# PTX signature check: extern device functions a program calls vs the functions the device library defines.
abi_check() { # abi_check PROGRAM.ptx require_all(0|1)
  python3 - "$ptx" "$1" "$2" <<'EOF'
import re, sys
lib_ptx, prog_ptx, require_all = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
decl = re.compile(r"\.(visible|extern)\s+\.func\s*(?:\(([^)]*)\))?\s*([A-Za-z_$%][\w$]*)\s*\(([^)]*)\)")
def params(text):
    out = []
    for p in filter(None, (x.strip() for x in (text or "").split(","))):
        t = p.split()
        m = re.search(r"\.align\s+(\d+)\s+\.b8\s+\S+\[(\d+)\]", p)
        if m: out.append("aggregate(align %s, %s bytes)" % m.groups()); continue
        ty = [x for x in t if re.fullmatch(r"\.[busf](8|16|32|64)", x)]
        out.append((ty[0][2:] + "-bit") if ty else p)
    return out
def funcs(path, kind):
    src = open(path).read()
    return {m.group(3): (params(m.group(2)), params(m.group(4))) for m in decl.finditer(src) if m.group(1) == kind}
lib = funcs(lib_ptx, "visible")
prog = funcs(prog_ptx, "extern")
errors = []
for name, (ret, args) in sorted(prog.items()):
    if name not in lib:
        if name.startswith("rshmem"):
            errors.append("%s: called but not defined by the device library" % name)
        continue
    lret, largs = lib[name]
    if (ret, args) != (lret, largs):
        errors.append("%s: caller passes (%s) -> %s, the device library takes (%s) -> %s" % (
            name, ", ".join(args), ret or "void", ", ".join(largs), lret or "void"))
if require_all:
    # The C ABI: unmangled names. Rust-mangled functions (_R..., _ZN...) are the crate's own internals,
    # visible in the PTX because they are public items of the crate, not part of the C API.
    for name in sorted(n for n in set(lib) - set(prog) if not re.match(r"_(R|ZN)", n)):
        errors.append("%s: exported by the device library but not called by the coverage test "
                      "(declare it in rshmem.h, wrap it in nvshmem*.h, call it in tests/cuda/nvshmem_api_coverage.cu)" % name)
for e in errors: print("  " + e, file=sys.stderr)
n = len([x for x in prog if x in lib])
print("%d device-library functions called, signatures match" % n if not errors else "%d problem(s)" % len(errors))
sys.exit(1 if errors else 0)
EOF
}

lcuda=()
if [ "$mode" = full ]; then
  libdir=${RSHMEM_LIBDIR:-}
  if [ -z "$libdir" ]; then
    if [ -f "$outdir/librshmem.so" ]; then libdir=$outdir; else libdir=$root/target/release; fi
  fi
  [ -f "$libdir/librshmem.so" ] || [ -f "$libdir/librshmem.a" ] ||
    die "no librshmem.so in '$libdir' (cargo build --release -p rshmem, or set RSHMEM_LIBDIR)"
  libdir=$(cd "$libdir" && pwd)
  if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\b' || [ -e "$cuda_bin/../lib64/libcuda.so" ] ||
    [ -e "$cuda_bin/../lib64/stubs/libcuda.so" ] || [ -e /usr/lib/x86_64-linux-gnu/libcuda.so ]; then
    lcuda=(-lcuda)
    [ -e "$cuda_bin/../lib64/stubs/libcuda.so" ] && ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\b' &&
      lcuda=(-L "$cuda_bin/../lib64/stubs" -lcuda)
  else
    log "no libcuda.so on this machine: linking without -lcuda (the CUDA runtime loads it at run time)"
  fi
  # The PyPI toolkit keeps libcudart_static.a / libcudadevrt.a in lib/, where nvcc.profile does not look.
  if [ ! -e "$cuda_bin/../lib64/libcudart_static.a" ] && [ -e "$cuda_bin/../lib/libcudart_static.a" ]; then
    lcuda+=(-L "$(cd "$cuda_bin/../lib" && pwd)")
  fi
fi

check_program() { # check_program NAME SOURCE DESCRIPTION require_all
  local name=$1 src=$2 what=$3 all=$4 keep=$work/keep-$1
  rm -rf "$keep" && mkdir -p "$keep"
  if ! run "$nvcc" -rdc=true -arch="$arch" -O2 -I "$inc" -c "$src" -o "$work/$name.o" --keep --keep-dir "$keep"; then
    bad "$what: nvcc -rdc=true -c"; return
  fi
  ok "$what: compiles (nvcc -rdc=true -arch=$arch -c)"
  if ! run "$nvcc" -arch="$arch" -dlink "$work/$name.o" "$lib" -o "$work/${name}_dlink.o" -Xnvlink --verbose \
    >"$work/$name.dlink.log" 2>&1; then
    grep -v '^nvlink info' "$work/$name.dlink.log" >&2
    bad "$what: device link against librshmem_device.a"; return
  fi
  ok "$what: device-links against librshmem_device.a (every rshmem_* device symbol resolved)"
  # Registers per kernel after the device link (callees included): 1024-thread blocks need <= 64.
  local regs
  regs=$(awk '/Function properties for/ { match($0, /for .*$/); k = substr($0, RSTART + 4); gsub(/[\x27:]/, "", k) }
              /used [0-9]+ registers/ { match($0, /used [0-9]+/); n = substr($0, RSTART + 5, RLENGTH - 5); if (k != "") print k, n; k = "" }' \
         "$work/$name.dlink.log")
  log "$what: registers per kernel: $(echo "$regs" | tr '\n' ' ')"
  if [ "$all" = 1 ]; then
    local probe
    probe=$(echo "$regs" | awk '$1 ~ /rshmem_api_coverage/ { print $2 }')
    if [ -z "$probe" ]; then
      bad "$what: no register count for the rshmem_api_coverage kernel in the nvlink log"
    elif [ "$probe" -gt 64 ]; then
      bad "$what: the kernel calling every device-library function needs $probe registers (> 64): kernels calling rshmem cannot launch 1024 threads per block (build the archive with RSHMEM_DEVICE_MAXRREG=64)"
    else
      ok "$what: a kernel calling every device-library function uses $probe registers (<= 64: 1024-thread blocks launch)"
    fi
  fi
  local kptx
  kptx=$(ls "$keep"/*.ptx 2>/dev/null | head -1)
  if [ -z "$kptx" ]; then bad "$what: no PTX left by --keep for the signature check"; return; fi
  local res
  if res=$(abi_check "$kptx" "$all"); then ok "$what: PTX signatures: $res"; else bad "$what: PTX signatures: $res"; fi
  if [ "$mode" = full ]; then
    if run "$nvcc" -rdc=true -arch="$arch" "$work/$name.o" "$lib" -L "$libdir" -lrshmem "${lcuda[@]}" \
      -Xlinker -rpath -Xlinker "$libdir" -o "$outdir/$name"; then
      ok "$what: linked $outdir/$name"
    else
      bad "$what: full link"
    fi
  fi
}

check_program ring_shift_cuda "$root/examples/cuda/ring_shift.cu" "examples/cuda/ring_shift.cu (rshmem.h)" 0
if [ -n "$seed" ]; then
  check_program simple_shift "$seed" "seed $(basename "$seed") unchanged (nvshmem.h)" 0
else
  skipped+=("the NVSHMEM seed program simple_shift.cu unchanged: not found at $(cd "$root/.." && pwd)/shared/seeds/ (CI's checkout has it there) nor given as SEED=path; examples/cuda/ring_shift.cu covered the same compile + device-link path")
fi
check_program nvshmem_api_coverage "$root/tests/cuda/nvshmem_api_coverage.cu" \
  "tests/cuda/nvshmem_api_coverage.cu (every nvshmem.h/nvshmemx.h/rshmem.h device call)" 1
check_program device_families "$root/tests/cuda/device_families.cu" \
  "tests/cuda/device_families.cu (half/bfloat16 RMA, strided RMA at 3 scopes, host and device AMOs; runs on GPUs)" 0
check_program inline_rma "$root/tests/cuda/inline_rma.cu" \
  "tests/cuda/inline_rma.cu (the header's inline put/get at every alignment and scope, every byte checked; runs on GPUs)" 0

# ---------------------------------------------------------------- NVSHMEM 3.4.5's names (issue 22)
# Every name of tests/api/nvshmem-3.4.5.names declared in the same pass (scripts/check-api-names.sh; the
# few known to be missing are listed with their reasons in tests/api/nvshmem-3.4.5.missing), and a
# program generated from the list that takes every function's address and uses every constant compiles,
# device-links, and links against librshmem.so (every host name resolves).
if names_out=$("$root/scripts/check-api-names.sh" 2>&1); then
  ok "$names_out"
else
  echo "$names_out" >&2
  bad "NVSHMEM 3.4.5 names: $(echo "$names_out" | head -1)"
fi
python3 "$root/scripts/gen_api_names_cu.py" "$root/tests/api/nvshmem-3.4.5.names" "$root/tests/api/nvshmem-3.4.5.missing" \
  >"$work/nvshmem_api_names.cu"
check_program nvshmem_api_names "$work/nvshmem_api_names.cu" \
  "every name of tests/api/nvshmem-3.4.5.names (a program generated from the list)" 0
if [ "$mode" != full ] && [ -f "$work/nvshmem_api_names.o" ]; then
  names_lib=""
  for d in "${RSHMEM_LIBDIR:-}" "$root/target/release" "$root/target/debug"; do
    if [ -n "$d" ] && [ -f "$d/librshmem.so" ]; then names_lib=$(cd "$d" && pwd); break; fi
  done
  if [ -z "$names_lib" ]; then
    skipped+=("linking the generated names program: no librshmem.so in target/ (cargo build -p rshmem first)")
  elif run "$nvcc" -arch="$arch" -dlink "$work/nvshmem_api_names.o" "$lib" -o "$work/nvshmem_api_names_dlink.o" &&
    run g++ "$work/nvshmem_api_names.o" "$work/nvshmem_api_names_dlink.o" "$lib" -L "$names_lib" -lrshmem \
      -L "$cuda_bin/../lib" -lcudadevrt -lcudart_static -lpthread -ldl -lrt -o "$work/nvshmem_api_names"; then
    ok "every name of tests/api/nvshmem-3.4.5.names: host link against $names_lib/librshmem.so (every host name resolves)"
  else
    bad "every name of tests/api/nvshmem-3.4.5.names: host link against $names_lib/librshmem.so"
  fi
fi

# ---------------------------------------------------------------- self-test: unresolved symbols must fail
neg=$work/unresolved_symbol.cu
cat >"$neg" <<'EOF'
#include <rshmem.h>
extern "C" __device__ void rshmem_no_such_function(void);
__global__ void calls_missing(int *p) { rshmem_p32(p, 1u, 0); rshmem_no_such_function(); }
EOF
if run "$nvcc" -rdc=true -arch="$arch" -I "$inc" -c "$neg" -o "$work/unresolved_symbol.o"; then
  if "$nvcc" -arch="$arch" -dlink "$work/unresolved_symbol.o" "$lib" -o "$work/unresolved_symbol_dlink.o" \
    2>"$work/unresolved_symbol.err"; then
    bad "self-test: a call to an undefined rshmem_* device function device-linked (the dlink check would miss it)"
  elif grep -q "rshmem_no_such_function" "$work/unresolved_symbol.err"; then
    ok "self-test: an undefined rshmem_* device function fails the device link ($(head -1 "$work/unresolved_symbol.err"))"
  else
    cat "$work/unresolved_symbol.err" >&2
    bad "self-test: the device link failed, but not by naming the missing function"
  fi
else
  bad "self-test: compiling the unresolved-symbol program"
fi

# ---------------------------------------------------------------- Rust kernel crates' PTX (built by cargo)
# The kernels of the examples, the test suite and the soak are compiled to PTX by their crates' build
# scripts and JIT-linked with the device library on GPUs: each must at least assemble.
if [ "$mode" = check ]; then
  for name in example_kernels test_kernels soak_kernels; do
    kptx=$(ls -t "$root"/target/release/build/*/out/$name.ptx 2>/dev/null | head -1)
    if [ -z "$kptx" ]; then
      bad "$name.ptx not found under target/release/build (run cargo build --workspace --release first)"
    elif [ ! -s "$kptx" ]; then
      bad "$name.ptx is empty (built with RSHMEM_SKIP_PTX=1?)"
    elif run "$ptxas" -arch="$arch" -c "$kptx" -o "$work/$name.cubin"; then
      ok "ptxas -arch=$arch -c assembles $name.ptx (Rust kernels)"
    else
      bad "ptxas -arch=$arch -c $kptx"
    fi
  done
fi

# ---------------------------------------------------------------- NVSHMEM's perftests (optional)
# Only with NVSHMEM_SRC=<checkout of NVIDIA/nvshmem> (CI cannot fetch it): its perftests, unchanged,
# compile and device-link against rshmem's headers and device library (bench/perftest.sh; its table is
# in target/perftest/perftest-table.md).
if [ -n "${NVSHMEM_SRC:-}" ]; then
  if PTX=$ptx MODE=check "$root/bench/perftest.sh" >"$work/perftest.log" 2>&1; then
    ok "NVSHMEM perftests ($NVSHMEM_SRC) unchanged: $(tail -1 "$work/perftest.log")"
  else
    sed -n '/^| program/,$p' "$work/perftest.log" >&2
    bad "NVSHMEM perftests ($NVSHMEM_SRC) unchanged: $(tail -1 "$work/perftest.log") (bench/perftest.sh; log $work/perftest.log)"
  fi
else
  log "NVSHMEM_SRC unset: skipping NVSHMEM's perftests (bench/perftest.sh)"
fi

# ---------------------------------------------------------------- summary
echo
echo "check-cuda-examples ($mode, $arch): ${#checked[@]} checks passed, ${#failed[@]} failed, ${#skipped[@]} skipped"
for c in "${checked[@]}"; do echo "  ok      $c"; done
for s in "${skipped[@]}"; do echo "  SKIPPED $s"; done
for f in "${failed[@]}"; do echo "  FAILED  $f"; done
[ ${#failed[@]} -eq 0 ]

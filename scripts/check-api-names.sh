#!/usr/bin/env bash
# The name-list coverage check (issue 22): every public name of NVSHMEM 3.4.5's nvshmem.h / nvshmemx.h
# (tests/api/nvshmem-3.4.5.names, made by scripts/api_names.py from NVSHMEM's own headers) must be
# declared by rshmem's headers in the same pass: host names in nvcc's host pass, device names __device__
# in its device pass, constants as enumerators or macros. Preprocesses device/include/{nvshmem,nvshmemx}.h
# both ways with the host compiler nvcc drives (the PyPI CUDA 13.0 tools: scripts/install-cuda-tools.sh),
# lists the names, and prints what is missing. Exit 0 when nothing is.
#   INCLUDE=dir        headers to check (default device/include); LIST=file (default the 3.4.5 list)
#   NAMES_OUT=file     also write the names found (to make a new list from another header set)
# tests/cuda/nvshmem_api_names.cu (generated from the list by scripts/gen_api_names_cu.py) is what proves
# the names compile and link; this script says which are missing, by family, before that build fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
nvcc=$("$root/scripts/find-nvcc.sh")
cuda=$(cd "$(dirname "$nvcc")/.." && pwd)
inc=${INCLUDE:-$root/device/include}
list=${LIST:-$root/tests/api/nvshmem-3.4.5.names}
# Names known to be missing, with the reasons (KIND NAME lines; # comments).
known=${KNOWN_MISSING:-${list%.names}.missing}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
printf '#include <nvshmem.h>\n#include <nvshmemx.h>\n' >"$work/t.cu"
flags=(-x c++ -std=c++17 -DCUDA_DOUBLE_MATH_FUNCTIONS -D__CUDACC__ -D__NVCC__ -D__CUDACC_VER_MAJOR__=13 -D__CUDACC_VER_MINOR__=0
  -D__CUDACC_VER_BUILD__=88 -D__CUDA_API_VER_MAJOR__=13 -D__CUDA_API_VER_MINOR__=0 -D__CUDACC_DEVICE_ATOMIC_BUILTINS__=1
  -D__CUDA_ARCH_LIST__=900 -include cuda_runtime.h -m64 -I "$inc" -I "$cuda/include" -isystem "$cuda/include/cccl")
gcc -E "${flags[@]}" "$work/t.cu" -o "$work/host.ii"
gcc -E -D__CUDA_ARCH__=900 "${flags[@]}" "$work/t.cu" -o "$work/dev.ii"
gcc -E -dM "${flags[@]}" "$work/t.cu" -o "$work/macros.txt"
python3 "$root/scripts/api_names.py" "$work/host.ii" "$work/dev.ii" "$work/macros.txt" >"$work/found"
[ -n "${NAMES_OUT:-}" ] && cp "$work/found" "$NAMES_OUT"
missing=$(comm -23 <(sort -u "$list") <(sort -u "$work/found"))
expected=$( { [ -f "$known" ] && grep -v '^#' "$known" | grep -v '^$'; } | sort -u || true)
unexpected=$(comm -23 <(echo "$missing" | grep -v '^$' || true) <(echo "$expected" | grep -v '^$' || true))
now_there=$(comm -13 <(echo "$missing" | grep -v '^$' || true) <(echo "$expected" | grep -v '^$' || true))
total=$(wc -l <"$list")
n=$(echo "$missing" | grep -c . || true)
counts=$(awk '{print $1}' "$list" | sort | uniq -c | awk '{printf "%s %s, ", $1, $2}' | sed 's/, $//')
if [ -z "$unexpected" ] && [ -z "$now_there" ]; then
  echo "api names: $((total - n)) of $total names of $(basename "$list") ($counts) are declared; $n listed as missing in $(basename "$known")"
  exit 0
fi
if [ -n "$unexpected" ]; then
  echo "api names: $(echo "$unexpected" | wc -l) of $total names of $(basename "$list") are not declared by $inc:"
  echo "$unexpected" | sed 's/^/  /'
fi
if [ -n "$now_there" ]; then
  echo "api names: declared now, remove from $(basename "$known"):"
  echo "$now_there" | sed 's/^/  /'
fi
exit 1

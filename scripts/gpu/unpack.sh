# scripts/gpu.sh unpack [DIR...]: unpacks the packs of DIR in place (default: carry carry-before, those
# that exist): DIR/pack.tar.xz (made by `scripts/gpu.sh prepare`: the large files of carry/, packed to
# fit what travels to the device machine) and DIR/pack-extras.tar.xz (`scripts/gpu.sh extras`), each once
# per copy of DIR. The other subcommands call it first. Uses xz through tar, or Python's tarfile where
# tar cannot (no xz program). This file is the subcommand's body: run it through scripts/gpu.sh.
set -eu
[ "${GPU_SH_PART:-}" = unpack ] || { echo "scripts/gpu/unpack.sh: run it as scripts/gpu.sh unpack" >&2; exit 2; }
cd "$(dirname "$0")/../.."
[ $# -gt 0 ] || set -- carry carry-before
for d in "$@"; do
  for pack in pack pack-extras; do
    p=$d/$pack.tar.xz
    mark=$d/.unpacked${pack#pack}
    [ -f "$p" ] || continue
    if [ -f "$mark" ] && [ ! "$p" -nt "$mark" ]; then continue; fi
    if ! tar -xJf "$p" -C "$d" 2>/dev/null; then
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$p" "$d"
    fi
    touch "$mark"
    echo "gpu.sh unpack: $p: $(tar -tJf "$p" 2>/dev/null | wc -l || echo '?') files unpacked"
  done
done

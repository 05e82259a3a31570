#!/usr/bin/env bash
# Installs the Python package rshmem (python/) into the current Python environment, and builds the
# launcher that runs its programs:
#   scripts/install-python.sh [--torch]
# then:
#   target/release/rshmrun -np 2 python3 python/examples/ring.py
# It builds the package with maturin (from PyPI, through pip's PEP 517 build: `pip install ./python`),
# which compiles the runtime with the toolchains scripts/setup.sh installs (stable Rust and nightly's
# rust-src for the device library); on a machine without nightly's rust-src it runs scripts/setup.sh
# first. NumPy comes as a dependency; --torch also installs PyTorch (from PyPI). PYTHON names the
# interpreter (default python3; a virtual environment's python installs into that environment).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
torch=0
for a in "$@"; do
  case "$a" in
    --torch) torch=1 ;;
    *) echo "usage: $0 [--torch]" >&2; exit 2 ;;
  esac
done
command -v "$py" >/dev/null 2>&1 || { echo "install-python: no $py (set PYTHON)" >&2; exit 1; }
"$py" -m pip --version >/dev/null 2>&1 || { echo "install-python: $py has no pip ($py -m ensurepip, or apt-get install python3-pip)" >&2; exit 1; }
if ! rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^rust-src'; then
  SETUP_SKIP_MPI=1 SETUP_SKIP_CUDA=1 "$root/scripts/setup.sh"
fi
pipi() { "$py" -m pip install -q --disable-pip-version-check --no-warn-script-location "$@"; }
if [ "$torch" = 1 ]; then pipi torch; fi
(cd "$root" && cargo build --release -q -p rshmem-launcher)
pipi "numpy>=1.23"   # the package's one dependency
# Rebuilt and reinstalled every time (the same version number covers every change of a clone).
pipi --force-reinstall --no-deps "$root/python"
"$py" -c 'import rshmem, os; print("install-python: rshmem installed in", os.path.dirname(rshmem.__file__))'
echo "install-python: run programs with $root/target/release/rshmrun -np N $py PROGRAM.py" >&2

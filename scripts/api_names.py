#!/usr/bin/env python3
"""Lists the public API names a preprocessed NVSHMEM-style header set declares.

Usage: api_names.py HOST.ii DEVICE.ii MACROS.txt > names
  HOST.ii    the headers preprocessed as the host pass of nvcc sees them (no __CUDA_ARCH__);
  DEVICE.ii  the same, preprocessed as the device pass sees them (__CUDA_ARCH__ defined);
  MACROS.txt the macro definitions the headers leave (gcc -dM -E), for #define constants.

Prints one line per name, sorted: `host NAME` (a function the host pass declares callable from host
code; _warp / _block / _warpgroup forms are device names only), `device NAME` (a function the device pass
declares __device__), `const NAME` (an enumerator or an object-like macro; include guards and the
build-configuration macros listed in EXCLUDED_CONSTS are not API). Public names are those starting nvshmem_ / nvshmemx_ / NVSHMEM_ / NVSHMEMX_ (not the
internal nvshmemi_ / NVSHMEMI_ ones). Only declarations and definitions at file scope count (a call inside
a function body is not a declaration). This is how tests/api/nvshmem-3.4.5.names was made from NVSHMEM
3.4.5's own headers (the nvidia-nvshmem-cu13 3.4.5 wheel); scripts/check-api-names.sh makes the same
lists from rshmem's headers and compares.
"""
import re
import sys

# Thread-group forms run only on a GPU: NVSHMEM declares some of them __host__ __device__ in one header
# and defines them __device__ in another; they are device names only.
DEVICE_SCOPE = re.compile(r"_(warp|block|warpgroup)(_nbi)?$")
# Stream forms are host calls that enqueue work; NVSHMEM declares the reductions' __host__ __device__.
HOST_ONLY = re.compile(r"_on_stream$")
# Not API: include guards and the macros that describe how NVSHMEM itself was built (which transports,
# which bootstraps, plugin interface versions). A program that tests them asks about NVSHMEM's build.
EXCLUDED_CONSTS = re.compile(r"(_H$|_SUPPORT$|^NVSHMEM_USE_|^NVSHMEM_BUILD_|^NVSHMEM_NVTX$|^NVSHMEM_ALWAYS_STATIC$|_PLUGIN_(MAJOR|MINOR|PATCH)_VERSION$)")
FUNC = re.compile(r"\b(nvshmemx?_[A-Za-z0-9_]+)\s*\(")
PUBLIC_CONST = re.compile(r"^(NVSHMEMX?_[A-Za-z0-9_]+)$")


def strip_lines(text):
    # Line markers and pragmas are not code.
    return "\n".join(l for l in text.split("\n") if not l.startswith("#"))


def file_scope_functions(text):
    """(name, attributes) of every function declared or defined at file scope (or in extern "C" /
    namespace blocks, which are transparent)."""
    text = strip_lines(text)
    out = []
    depth = 0          # braces of function bodies, classes, initializers
    transparent = []   # stack: True for an extern "C" / namespace block's brace
    start = 0          # start of the current declaration
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':   # skip string literals
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c == "{":
            head = text[start:i]
            is_transparent = depth == 0 and re.search(r'(extern\s+"C(\+\+)?"|namespace(\s+\w+)?)\s*$', head) is not None
            if depth == 0 and not is_transparent:
                collect(head, out)
            transparent.append(is_transparent)
            if not is_transparent:
                depth += 1
            start = i + 1
        elif c == "}":
            t = transparent.pop() if transparent else False
            if not t:
                depth -= 1
            start = i + 1
        elif c == ";" and depth == 0:
            collect(text[start:i], out)
            start = i + 1
        i += 1
    return out


def collect(decl, out):
    m = FUNC.search(decl)
    if not m:
        return
    # The declared name is the first nvshmem name followed by "(" that is not inside an attribute.
    head = decl[: m.start()]
    if "typedef" in head or "=" in head:
        return
    out.append((m.group(1), head))


def kinds(decl_head):
    dev = "device" in re.findall(r"__attribute__\s*\(\(\s*(\w+)", decl_head) or "__device__" in decl_head
    host = "host" in re.findall(r"__attribute__\s*\(\(\s*(\w+)", decl_head) or "__host__" in decl_head
    glob = "global" in re.findall(r"__attribute__\s*\(\(\s*(\w+)", decl_head)
    return dev, host, glob


def main():
    host_ii, dev_ii, macros = (open(p, errors="replace").read() for p in sys.argv[1:4])
    names = set()
    # `host`: declared callable from host code in the host pass (__host__, __host__ __device__ or no
    # attribute), thread-group forms excepted; `device`: declared __device__ in the device pass.
    for name, head in file_scope_functions(host_ii):
        dev, host, glob = kinds(head)
        if name.startswith("nvshmemi_") or glob or (dev and not host) or DEVICE_SCOPE.search(name):
            continue
        names.add(("host", name))
    for name, head in file_scope_functions(dev_ii):
        dev, _, glob = kinds(head)
        if not name.startswith("nvshmemi_") and dev and not glob and not HOST_ONLY.search(name):
            names.add(("device", name))
    # Enumerators: NAME [= value] inside enum { ... }.
    for body in re.findall(r"\benum\b[^{;]*\{([^}]*)\}", strip_lines(host_ii)):
        for item in body.split(","):
            m = re.match(r"\s*([A-Za-z_]\w*)", item)
            if m and PUBLIC_CONST.match(m.group(1)) and not EXCLUDED_CONSTS.search(m.group(1)):
                names.add(("const", m.group(1)))
    for line in macros.split("\n"):
        m = re.match(r"#define\s+([A-Za-z_]\w*)(\s|$)", line)   # object-like macros only
        if m and PUBLIC_CONST.match(m.group(1)) and not EXCLUDED_CONSTS.search(m.group(1)):
            names.add(("const", m.group(1)))
    for kind, name in sorted(names):
        print(kind, name)


if __name__ == "__main__":
    main()

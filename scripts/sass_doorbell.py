#!/usr/bin/env python3
"""Checks the instruction order of the IBGDA doorbell path in the device library's machine code:

    python3 scripts/sass_doorbell.py FILE.sass      (nvdisasm -c output of the device library's cubin)
    python3 scripts/sass_doorbell.py --self-test

The doorbell path is `QpDesc::post_send` for the device (`rshmem_ibgda::post`, never inlined, so it is
one function here). A NIC must see a QP's WQEs before its doorbell record and the record before the
doorbell (research/ibgda-mlx5.md §3.2); the code orders them with release stores whose scope is the
queues' (`QP_GPU_MEMORY`): system scope for queues in host memory, GPU scope for queues in GPU memory
(as NVSHMEM's `st.release.gpu` there), so the function holds both forms, one under each value of a
predicate. This check reads what the compiler made of them: in every such function, every strong store
(`ST.E[.64].STRONG.SYS` or `.GPU`: the doorbell record, the doorbell, the `rung` ticket's release)
must have a barrier of at least its scope (`MEMBAR.*.SYS`; for a GPU-scope store `MEMBAR.*.GPU` too)
between it and the memory operation before it under the same guard (an unguarded instruction counts
under every guard; a guard's barrier no longer counts once its predicate is written), and the
function must contain, at each scope, the 32-bit doorbell-record store followed by the 64-bit doorbell
store. Prints one line per function; exits non-zero on any breach, naming the instructions. Python 3
standard library only.
"""
import re
import sys

FUNC = re.compile(r"^\.text\.(\S*9post_send\S*3Dev\S*):\s*$")
INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*)")
# Stores and atomics: what a barrier must order before the next strong store (loads need not be).
MEMOP = re.compile(r"^(ST|STG|STL|STS|ATOM|ATOMG|ATOMS|RED)(\.|$)")
STRONG = re.compile(r"^ST\.E(\.64)?\.STRONG\.(SYS|GPU)$")
RANK = {"GPU": 1, "SYS": 2}


def functions(text):
    """{name: [(address, guard, mnemonic, operands)]} of the doorbell functions in nvdisasm -c text."""
    out, cur = {}, None
    for line in text.splitlines():
        m = FUNC.match(line.strip())
        if m:
            cur = m.group(1)
            out[cur] = []
            continue
        if line.startswith("//----") or line.lstrip().startswith(".section"):
            if cur is not None and out[cur]:
                cur = None
            continue
        if cur is not None:
            i = INSN.search(line)
            if i:
                out[cur].append((i.group(1), (i.group(2) or "").strip(), i.group(3), i.group(4).strip()))
    return out


def written_predicates(operands):
    """The predicate registers an instruction writes: its leading P operands (ISETP P0, PT, ...)."""
    out = []
    for o in operands.split(","):
        o = o.strip()
        if re.fullmatch(r"U?P[0-6]", o):
            out.append(o)
        elif o != "PT":
            break
    return out


def check(insns):
    """Problems found in one function's instructions (empty: the order holds)."""
    problems = []
    base = 0  # rank of the unguarded barrier since the last unguarded memory operation
    fence = {}  # guard -> rank of the barrier covering that guard since its last memory operation
    strong = []
    for addr, guard, op, operands in insns:
        for p in written_predicates(operands):
            for g in [g for g in fence if g.lstrip("@!") == p]:
                del fence[g]
        have = fence.get(guard, base) if guard else base
        scope = op.split(".")[-1]
        if op.startswith("MEMBAR.") and scope in RANK:
            if guard:
                fence[guard] = max(have, RANK[scope])
            else:
                base = max(base, RANK[scope])
                fence = {g: max(r, base) for g, r in fence.items()}
            continue
        s = STRONG.match(op)
        if s:
            if have < RANK[s.group(2)]:
                problems.append(f"{guard + ' ' if guard else ''}{op} at {addr} without a barrier of its scope after the memory operation before it")
            strong.append((addr, op))
        if s or MEMOP.match(op):
            if guard:
                # The complementary guard's path did not run it: it keeps what covered it. Any other
                # guard (or the same predicate, rewritten later) may be on this path: base is gone.
                other = "@" + guard[2:] if guard.startswith("@!") else "@!" + guard[1:]
                fence[other] = fence.get(other, base)
                fence[guard] = 0
                base = 0
            else:
                base, fence = 0, {}
    for scope in ("SYS", "GPU"):
        ops = [op for _, op in strong if op.endswith("." + scope)]
        dbr = next((i for i, op in enumerate(ops) if op == f"ST.E.STRONG.{scope}"), None)
        if dbr is None or f"ST.E.64.STRONG.{scope}" not in ops[dbr + 1:]:
            problems.append(f"no 32-bit doorbell-record store followed by a 64-bit doorbell store among the {scope} stores {ops}")
    return problems


def main_check(path):
    with open(path, errors="replace") as f:
        funcs = functions(f.read())
    if not funcs:
        print(f"sass_doorbell: FAILED: no QpDesc::post_send for the device in {path} (was it inlined?)")
        return 1
    bad = 0
    for name, insns in funcs.items():
        problems = check(insns)
        if problems:
            bad += 1
            print(f"sass_doorbell: FAILED: {name}: " + "; ".join(problems))
        else:
            n = {sc: sum(1 for _, _, op, _ in insns if op.startswith("MEMBAR.") and op.endswith("." + sc)) for sc in RANK}
            print(f"sass_doorbell: ok: {name}: {len(insns)} instructions, {n['SYS']} system-scope and {n['GPU']} GPU-scope barriers, each strong store after one of its scope")
    return 1 if bad else 0


GOOD = """\
//--------------------- .text._RINvQpDesc9post_sendNtDev3DevE --------------------------
.text._RINvQpDesc9post_sendNtDev3DevE:
        /*0200*/                   ATOM.E.MAX.64.STRONG.SYS P0, R4, desc[UR4][R24.64+0x10], R18 ;
        /*0520*/                   MEMBAR.ALL.SYS ;
        /*0ed0*/                   ISETP.NE.AND P0, PT, R2, RZ, PT ;
        /*0fb0*/              @!P0 MEMBAR.ALL.CTA ;
        /*0fc0*/              @!P0 MEMBAR.ALL.SYS ;
        /*0ff0*/              @!P0 ST.E.STRONG.SYS desc[UR4][R4.64+0x4], R11 ;
        /*1040*/               @P0 MEMBAR.ALL.CTA ;
        /*1050*/               @P0 MEMBAR.ALL.GPU ;
        /*1080*/               @P0 ST.E.STRONG.GPU desc[UR6][R4.64+0x4], R11 ;
        /*1260*/              @!P0 MEMBAR.ALL.SYS ;
        /*12a0*/              @!P0 ST.E.64.STRONG.SYS desc[UR10][R8.64], R4 ;
        /*12f0*/               @P0 MEMBAR.ALL.GPU ;
        /*1330*/               @P0 ST.E.64.STRONG.GPU desc[UR4][R8.64], R4 ;
        /*1480*/                   MEMBAR.ALL.GPU ;
        /*14c0*/                   ST.E.STRONG.GPU desc[UR4][R24.64+0x30], R18 ;
        /*1720*/                   RET.ABS.NODEC R20 0x0 ;
//--------------------- .text.other --------------------------
.text.other:
        /*0000*/                   ST.E.64.STRONG.SYS desc[UR4][R4.64], R6 ;
"""

NAME = "_RINvQpDesc9post_sendNtDev3DevE"


def self_test():
    f = functions(GOOD)
    assert list(f) == [NAME], f
    assert check(f[NAME]) == [], check(f[NAME])

    def problems(text):
        return check(functions(text)[NAME])

    # The system-scope barrier before the doorbell removed: named.
    p = problems(GOOD.replace("        /*1260*/              @!P0 MEMBAR.ALL.SYS ;\n", ""))
    assert len(p) == 1 and "ST.E.64.STRONG.SYS at 12a0" in p[0], p
    # Only a GPU-scope barrier before a system-scope store: named.
    p = problems(GOOD.replace("/*1260*/              @!P0 MEMBAR.ALL.SYS", "/*1260*/              @!P0 MEMBAR.ALL.GPU"))
    assert len(p) == 1 and "ST.E.64.STRONG.SYS at 12a0" in p[0], p
    # The barrier under the other guard does not count: named.
    p = problems(GOOD.replace("/*12f0*/               @P0 MEMBAR.ALL.GPU", "/*12f0*/              @!P0 MEMBAR.ALL.GPU"))
    assert len(p) == 1 and "ST.E.64.STRONG.GPU at 1330" in p[0], p
    # The predicate written between the barrier and the store: the barrier no longer counts.
    p = problems(GOOD.replace("        /*1330*/", "        /*1310*/                   ISETP.NE.AND P0, PT, R3, RZ, PT ;\n        /*1330*/"))
    assert len(p) == 1 and "ST.E.64.STRONG.GPU at 1330" in p[0], p
    # A store between the barrier and the doorbell record under the same guard: named.
    p = problems(GOOD.replace("        /*0ff0*/", "        /*0fe0*/              @!P0 ST.E desc[UR4][R8.64], R9 ;\n        /*0ff0*/"))
    assert len(p) == 1 and "ST.E.STRONG.SYS at 0ff0" in p[0], p
    # An unguarded store between the first barrier and both record stores: the one whose guard has
    # no barrier after it is named (the other's barrier at 1050 follows the store).
    p = problems(GOOD.replace("        /*0fb0*/", "        /*0fa0*/                   ST.E desc[UR4][R8.64], R9 ;\n        /*0fb0*/").replace("/*0fc0*/              @!P0 MEMBAR.ALL.SYS", "/*0fc0*/              @!P0 NOP"))
    assert len(p) == 1 and "ST.E.STRONG.SYS at 0ff0" in p[0], p
    # No 32-bit doorbell-record store before the 64-bit doorbell at one scope: named.
    p = problems(GOOD.replace("@P0 ST.E.STRONG.GPU", "@P0 ST.E.64.STRONG.GPU"))
    assert len(p) == 1 and "doorbell-record" in p[0] and "GPU" in p[0], p
    print("sass_doorbell self-test: ok")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "--self-test":
        sys.exit(self_test())
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main_check(sys.argv[1]))

#!/usr/bin/env python3
"""Checks the instruction order of the IBGDA doorbell path in the device library's machine code:

    python3 scripts/sass_doorbell.py FILE.sass      (nvdisasm -c output of the device library's cubin)
    python3 scripts/sass_doorbell.py --self-test

The doorbell path is `QpDesc::post_send` for the device (`rshmem_ibgda::post`, never inlined, so it is
one function here). A NIC must see a QP's WQEs before its doorbell record and the record before the
doorbell (research/ibgda-mlx5.md §3.2); the code orders them with system-scope release stores. This
check reads what the compiler made of them: in every such function, every system-scope strong store
(`ST.E[.64].STRONG.SYS`: the doorbell record, the doorbell, the `rung` ticket's release) must have a
system-scope barrier (`MEMBAR.*.SYS`) between it and the memory operation before it, and the function
must contain the 32-bit doorbell-record store followed by the 64-bit doorbell store. Prints one line
per function; exits non-zero on any breach, naming the instructions. Python 3 standard library only.
"""
import re
import sys

FUNC = re.compile(r"^\.text\.(\S*9post_send\S*3Dev\S*):\s*$")
INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
# Stores and atomics: what a barrier must order before the next system-scope store (loads need not be).
MEMOP = re.compile(r"^(ST|STG|STL|STS|ATOM|ATOMG|ATOMS|RED)(\.|$)")


def functions(text):
    """{name: [(address, mnemonic)]} of the doorbell functions in nvdisasm -c text."""
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
                out[cur].append((i.group(1), i.group(2)))
    return out


def check(insns):
    """Problems found in one function's instructions (empty: the order holds)."""
    problems = []
    fenced = False  # a MEMBAR.*.SYS since the last memory operation
    strong = []
    for addr, op in insns:
        if op.startswith("MEMBAR.") and op.endswith(".SYS"):
            fenced = True
        elif re.match(r"^ST\.E(\.64)?\.STRONG\.SYS$", op):
            if not fenced:
                problems.append(f"{op} at {addr} without a system-scope barrier after the memory operation before it")
            strong.append((addr, op))
            fenced = False
        elif MEMOP.match(op):
            fenced = False
    ops = [op for _, op in strong]
    dbr = next((i for i, op in enumerate(ops) if op == "ST.E.STRONG.SYS"), None)
    if dbr is None or "ST.E.64.STRONG.SYS" not in ops[dbr + 1:]:
        problems.append(f"no 32-bit doorbell-record store followed by a 64-bit doorbell store among the system-scope stores {ops}")
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
            n = sum(1 for _, op in insns if op.startswith("MEMBAR.") and op.endswith(".SYS"))
            print(f"sass_doorbell: ok: {name}: {len(insns)} instructions, {n} system-scope barriers, each system-scope store after one")
    return 1 if bad else 0


GOOD = """\
//--------------------- .text._RINvQpDesc9post_sendNtDev3DevE --------------------------
.text._RINvQpDesc9post_sendNtDev3DevE:
        /*0200*/                   ATOM.E.CAS.STRONG.SYS PT, R0, [R24+0x30], R4, R5 ;
        /*0520*/                   MEMBAR.ALL.SYS ;
        /*0570*/                   ATOM.E.MAX.64.STRONG.SYS P0, R4, desc[UR4][R24.64+0x10], R30 ;
        /*0870*/                   MEMBAR.ALL.CTA ;
        /*0880*/                   MEMBAR.ALL.SYS ;
        /*08b0*/                   ST.E.STRONG.SYS desc[UR4][R6.64+0x4], R3 ;
        /*09f0*/                   MEMBAR.ALL.SYS ;
        /*0a20*/                   ST.E.64.STRONG.SYS desc[UR4][R4.64], R6 ;
        /*0b00*/                   MEMBAR.ALL.SYS ;
        /*0b30*/                   ST.E.STRONG.SYS desc[UR4][R24.64+0x30], RZ ;
        /*0c60*/                   RET.ABS.NODEC R20 0x0 ;
//--------------------- .text.other --------------------------
.text.other:
        /*0000*/                   ST.E.64.STRONG.SYS desc[UR4][R4.64], R6 ;
"""


def self_test():
    f = functions(GOOD)
    assert list(f) == ["_RINvQpDesc9post_sendNtDev3DevE"], f
    assert check(f["_RINvQpDesc9post_sendNtDev3DevE"]) == [], check(f["_RINvQpDesc9post_sendNtDev3DevE"])
    # The barrier before the doorbell removed: named.
    bad = GOOD.replace("        /*09f0*/                   MEMBAR.ALL.SYS ;\n", "")
    p = check(functions(bad)["_RINvQpDesc9post_sendNtDev3DevE"])
    assert len(p) == 1 and "ST.E.64.STRONG.SYS at 0a20" in p[0], p
    # A store between the barrier and the doorbell record: named.
    bad = GOOD.replace("        /*08b0*/", "        /*08a0*/                   ST.E desc[UR4][R8.64], R9 ;\n        /*08b0*/")
    p = check(functions(bad)["_RINvQpDesc9post_sendNtDev3DevE"])
    assert len(p) == 1 and "ST.E.STRONG.SYS at 08b0" in p[0], p
    # No 32-bit doorbell-record store before the 64-bit doorbell: named.
    only64 = GOOD.replace("ST.E.STRONG.SYS", "ST.E.64.STRONG.SYS")
    p = check(functions(only64)["_RINvQpDesc9post_sendNtDev3DevE"])
    assert len(p) == 1 and "doorbell-record" in p[0], p
    print("sass_doorbell self-test: ok")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "--self-test":
        sys.exit(self_test())
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main_check(sys.argv[1]))

"""The float dataflow of a kernel's SASS (cuobjdump -sass), for comparing two kernels instruction for instruction.

What a GPU computes is the SASS: ptxas may still fuse a PTX mul and add (without .rn) into one FFMA, and
which products nvcc and ptxas fuse depends on the code around an expression. This turns each value a SASS
kernel defines into a node (operation, operand nodes) whose identity is a hash of its whole expression tree:
loads are leaves named by what they read (`leaf_name`), integer computations collapse into one leaf, register
moves (MOV, R2UR, spills to local memory and back) are looked through, the operands of commutative
operations are sorted, and an FFMA's or FMUL's negated factor is folded into the sign of its product. An
operand is the set of definitions of its register that reach that use along the control flow (a phi where
several do; loop-carried ones drop out; a predicated definition also lets the older one through). Two
kernels compute a value with the same float instructions (FFMA against FMUL + FADD, the operand order of
each fused multiply-add, the MUFU variant) exactly when its node appears in both.

Used by tests/device/sass_3dgut.py (the 3DGUT lpt kernel against gsplat's eval3d forward kernel).
"""

from __future__ import annotations

import hashlib
import re
import struct
import sys
from typing import Callable, Dict, FrozenSet, List, NamedTuple, Optional, Set, Tuple

Nodes = Dict[str, Tuple[str, List[str]]]
LeafName = Callable[[str, str, int], str]  # (opcode, memory operand, byte offset in a wide load) -> leaf label

_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P[0-6T]\s+)?([A-Z][A-Z0-9_.]*)\s*(.*?)\s*;")
_REGISTER = re.compile(r"^[-!~|]*(U?R\d+|URZ|RZ|U?P[0-6]|U?PT|SRZ)((?:\.[A-Za-z0-9_]+)*)\|?$")
_PREDICATE = re.compile(r"^U?P[0-6]$")
_NO_DEST = ("ST", "RED", "BRA", "BRX", "JMX", "EXIT", "RET", "CALL", "BSSY", "BSYNC", "BREAK", "WARPSYNC", "NOP",
            "BAR", "MEMBAR", "ERRBAR", "CGAERRBAR", "CCTL", "ENDCOLLECTIVE", "BPT", "KILL", "YIELD", "DEPBAR")
_ENDS_BLOCK = ("BRA", "BRX", "JMX", "EXIT", "RET", "BPT")
_FLOAT = ("FFMA", "FMUL", "FADD", "FSETP", "FSEL", "FMNMX", "FRND", "FCHK", "F2I", "F2F", "I2F", "I2FP", "MUFU",
          "DADD", "DMUL", "DFMA", "DSETP", "HADD2", "HMUL2", "HFMA2", "FSWZADD")
_MOVES = ("MOV", "UMOV", "R2UR", "IMAD.MOV.U32", "IMAD.MOV")


class Instruction(NamedTuple):
    address: int
    guard: str  # "@P0", "@!P1", ...: executed under a predicate, the register may keep its older value; or ""
    opcode: str
    operands: List[str]

    @property
    def guarded(self) -> bool:
        return bool(self.guard)


def instructions(sass: str, function: str) -> List[Instruction]:
    """The instructions of the function of `cuobjdump -sass` output whose (mangled) name contains `function`."""
    parts = re.split(r"\n\s*Function : (\S+)\n", sass)
    for k in range(1, len(parts), 2):
        if function in parts[k]:
            found = []
            for match in _LINE.finditer(parts[k + 1]):
                operands = [o.strip() for o in match.group(4).split(",")] if match.group(4) else []
                guard = (match.group(2) or "").strip()
                found.append(Instruction(int(match.group(1), 16), "" if guard in ("", "@PT") else guard,
                                         match.group(3), operands))
            return found
    raise KeyError(f"no function containing {function!r}")


def _width(opcode: str) -> int:
    parts = opcode.split(".")
    if "128" in parts:
        return 4
    if ("64" in parts or parts[0] in ("CS2R", "DADD", "DMUL", "DFMA") or (parts[0] in ("IMAD", "UIMAD") and "WIDE" in parts)
            or (parts[0] in ("F2F", "I2F") and len(parts) > 1 and parts[1] == "F64")) and "32" not in parts:
        return 2
    return 1


def _registers(name: str, count: int) -> List[str]:
    if name in ("RZ", "URZ", "PT", "UPT", "SRZ") or count == 1:
        return [name]
    prefix, number = re.match(r"(U?R)(\d+)", name).groups()
    return [f"{prefix}{int(number) + k}" for k in range(count)]


def destinations(ins: Instruction) -> List[str]:
    """The registers `ins` writes: its first operand (a pair or four for 64- and 128-bit results) and any
    predicates right after it (the SETPs' two, a carry out)."""
    if ins.opcode.startswith(_NO_DEST) or not ins.operands:
        return []
    first = _REGISTER.match(ins.operands[0])
    if not first or ins.operands[0][0] in "-!|~":
        return []
    found = _registers(first.group(1), _width(ins.opcode))
    for operand in ins.operands[1:]:
        if not _PREDICATE.match(operand) and operand not in ("PT", "UPT"):
            break
        found.append(operand)
    return [r for r in found if r not in ("RZ", "URZ", "PT", "UPT")]


def _stack_slot(ins: Instruction) -> Optional[str]:
    """Local memory at a constant offset from the stack pointer R1 (spills), as a pseudo-register."""
    for operand in ins.operands:
        found = re.match(r"\[R1(?:\+(0x[0-9a-f]+))?\]$", operand)
        if found:
            return f"L{int(found.group(1) or '0', 16)}"
    return None


def _control_flow(code: List[Instruction], indirect: Dict[int, List[int]]):
    at = {ins.address: k for k, ins in enumerate(code)}
    starts = {0}
    targets_of: Dict[int, List[int]] = {}
    for k, ins in enumerate(code):
        base = ins.opcode.split(".")[0]
        targets: List[int] = []
        if base in ("BRA", "CALL") and ins.operands and re.match(r"0x[0-9a-f]+$", ins.operands[-1]):
            targets = [at[int(ins.operands[-1], 16)]]
        elif base in ("BRX", "JMX"):
            targets = [at[t] for t in indirect.get(ins.address, [])]
        if targets or base in _ENDS_BLOCK or base == "CALL":
            targets_of[k] = targets
            starts.add(k + 1)
            starts.update(targets)
    starts = sorted(s for s in starts if s < len(code))
    blocks = [(s, starts[n + 1] if n + 1 < len(starts) else len(code)) for n, s in enumerate(starts)]
    block_at = {s: n for n, s in enumerate(starts)}
    calls = [k + 1 for k, ins in enumerate(code) if ins.opcode.startswith("CALL.REL") and k + 1 < len(code)]
    successors = []
    for first, end in blocks:
        last = code[end - 1]
        base = last.opcode.split(".")[0]
        nexts = [block_at[t] for t in targets_of.get(end - 1, [])]
        if base == "RET":
            nexts = [block_at[c] for c in calls]
        falls = base not in _ENDS_BLOCK or last.guarded
        if base == "CALL":
            falls = False  # continues at the return address, through the subroutine's RET
        if falls and end < len(code):
            nexts.append(block_at[end])
        successors.append(nexts)
    return blocks, successors


def dataflow(code: List[Instruction], leaf_name: LeafName, indirect: Dict[int, List[int]] = None) -> Tuple[Nodes, Dict[int, List[str]]]:
    """Node hash -> (label, child hashes) for every value defined in the kernel, and the nodes each
    instruction defines (by instruction index). `indirect` maps a BRX's address to its targets."""
    indirect = indirect or {}
    writes: List[List[str]] = []
    for ins in code:
        found = destinations(ins)
        if ins.opcode.startswith("STL"):
            slot = _stack_slot(ins)
            found = [f"L{int(slot[1:]) + 4 * k}" for k in range(_width(ins.opcode))] if slot else []
        writes.append(found)

    blocks, successors = _control_flow(code, indirect)
    predecessors: List[List[int]] = [[] for _ in blocks]
    for n, nexts in enumerate(successors):
        for m in nexts:
            predecessors[m].append(n)

    def run(state: Dict[str, FrozenSet[int]], first: int, end: int, uses=None):
        for k in range(first, end):
            if uses is not None:
                uses[k] = dict(state)
            for register in writes[k]:
                kept = state.get(register, frozenset()) if code[k].guarded else frozenset()
                state[register] = kept | {k}
        return state

    entry: List[Dict[str, FrozenSet[int]]] = [{} for _ in blocks]
    exits = [run({}, *block) for block in blocks]
    changed = True
    while changed:
        changed = False
        for n, block in enumerate(blocks):
            merged: Dict[str, FrozenSet[int]] = {}
            for p in predecessors[n]:
                for register, ds in exits[p].items():
                    merged[register] = merged.get(register, frozenset()) | ds
            if merged != entry[n]:
                entry[n] = merged
                out = run(dict(merged), *block)
                if out != exits[n]:
                    exits[n] = out
                    changed = True
    state_at: Dict[int, Dict[str, FrozenSet[int]]] = {}
    for n, block in enumerate(blocks):
        run(dict(entry[n]), *block, uses=state_at)

    nodes: Nodes = {}
    memo: Dict[Tuple[int, str], str] = {}

    def node(label: str, children: List[str]) -> str:
        key = hashlib.sha1((label + "(" + ",".join(children) + ")").encode()).hexdigest()[:16]
        nodes[key] = (label, children)
        return key

    INT = node("int", [])

    def value(k: int, register: str, stack: Tuple[Tuple[int, str], ...]) -> str:
        if register in ("RZ", "URZ", "SRZ"):
            return node("k:0x00000000", [])
        if register in ("PT", "UPT"):
            return node("true", [])
        members: Set[str] = set()
        reaching = state_at[k].get(register, frozenset())
        guard = code[k].guard
        if guard:
            # a use under the guard of its definition (@P0 LDG R2; @P0 R2UR UR4, R2) sees that definition only
            predicate = guard.lstrip("@!")
            same = frozenset(d for d in reaching if code[d].guard == guard
                             and state_at[d].get(predicate) == state_at[k].get(predicate))
            reaching = same or reaching
        for d in sorted(reaching):
            if (d, register) in stack:  # loop-carried
                continue
            member = definition(d, register, stack)
            label, children = nodes[member]
            if label == "phi":
                members.update(children)
            elif label != "loop":
                members.add(member)
        if not members:
            return node("loop" if reaching else "undefined:" + register, [])
        return next(iter(members)) if len(members) == 1 else node("phi", sorted(members))

    def operand(k: int, text: str, stack, pair: bool = False) -> str:
        """An operand's node, with its modifiers (-x, |x|, !p) as nodes around it."""
        text = text.replace(".reuse", "")
        found = _REGISTER.match(text)
        if not found:
            if "[" in text:
                return node("address", [])
            return node(constant(text), [])
        name = found.group(1)
        if pair or ".64" in (found.group(2) or ""):
            result = node("pair", [value(k, r, stack) for r in _registers(name, 2)])
        else:
            result = value(k, name, stack)
        if "|" in text:
            result = node("abs", [result])
        if text.startswith("-"):
            result = node("neg", [result])
        if text.startswith("!") or text.startswith("~"):
            result = node("not", [result])
        return result

    def definition(k: int, register: str, stack=()) -> str:
        if (k, register) in memo:
            return memo[(k, register)]
        ins = code[k]
        stack = stack + ((k, register),)
        parts = ins.opcode.split(".")
        base = parts[0]
        index = writes[k].index(register)
        label = ins.opcode
        if index and base not in ("LDG", "LDS", "LDL", "LDC", "ULDC", "LD", "STL"):
            label += f"#{index}"
        sources = ins.operands[1:]
        while sources and (_PREDICATE.match(sources[0]) or sources[0] in ("PT", "UPT")) and base.endswith("SETP"):
            sources = sources[1:]  # the SETP's second destination predicate
        if base == "STL":
            stored = _registers(_REGISTER.match(ins.operands[-1]).group(1), _width(ins.opcode))
            result = value(k, stored[index], stack)
        elif base in ("LDL",) and _stack_slot(ins):
            slot = int(_stack_slot(ins)[1:]) + 4 * index
            result = value(k, f"L{slot}", stack)
        elif base == "CS2R" and sources == ["SRZ"]:
            result = node("k:0x00000000", [])
        elif base in ("LDG", "LDS", "LD", "LDC", "ULDC", "LDL", "ATOMG", "ATOMS", "S2R", "S2UR", "CS2R", "B2R", "VOTEU", "VOTE"):
            address = ins.operands[1] if len(ins.operands) > 1 else ""
            result = node(leaf_name(ins.opcode, address, 4 * index), [])
        elif ins.opcode in _MOVES or (base in ("MOV", "UMOV", "R2UR") and len(sources) >= 1):
            source = sources[-1] if ins.opcode.startswith("IMAD.MOV") else sources[0]
            result = operand(k, source, stack)
        elif base == "HFMA2" and "MMA" in parts and sources[:2] == ["-RZ", "RZ"]:  # a constant, in the half pipe
            halves = [struct.unpack("<H", struct.pack("<e", float(h)))[0] for h in sources[2:4]]
            result = node(f"k:0x{halves[0] << 16 | halves[1]:08x}", [])
        else:
            pair = base in ("DADD", "DMUL", "DFMA", "DSETP") or (base == "F2F" and len(parts) > 2 and parts[2] == "F64")
            children = [operand(k, s, stack, pair) for s in sources]
            if base in ("FADD", "FMUL", "DADD", "DMUL", "FMNMX", "HADD2", "HMUL2") and len(children) >= 2:
                children = _signed_product(nodes, node, children) if base in ("FMUL", "DMUL") else sorted(children[:2]) + children[2:]
            elif base in ("FFMA", "DFMA", "HFMA2"):
                children = _signed_product(nodes, node, children)
            if not base.startswith(_FLOAT) and all(nodes[c][0] in ("int", "true", "param") or nodes[c][0].startswith("k:")
                                                     for c in children):
                result = INT
            else:
                result = node(label, children)
        memo[(k, register)] = result
        return result

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 50000))
    defined: Dict[int, List[str]] = {}
    try:
        for k in range(len(code)):
            for register in writes[k]:
                defined.setdefault(k, []).append(definition(k, register))
    finally:
        sys.setrecursionlimit(limit)
    return nodes, defined


def constant(text: str) -> str:
    """An immediate as its 32-bit pattern (SASS writes float immediates in decimal, moved ones in hex)."""
    try:
        if re.match(r"^-?0x[0-9a-f]+$", text):
            return f"k:0x{int(text, 16) & 0xffffffff:08x}"
        value = {"+INF": "inf", "-INF": "-inf", "+QNAN": "nan", "-QNAN": "-nan"}.get(text, text)
        return f"k:0x{struct.unpack('<I', struct.pack('<f', float(value)))[0]:08x}"
    except (ValueError, OverflowError, struct.error):
        return text


def _signed_product(nodes: Nodes, node, children: List[str]) -> List[str]:
    """a * b (+ c) with the factors' signs folded into one sign of the product, the factors sorted."""
    negative = False
    factors = []
    for child in children[:2]:
        if nodes[child][0] == "neg":
            negative = not negative
            child = nodes[child][1][0]
        factors.append(child)
    return [node("-" if negative else "+", [])] + sorted(factors) + children[2:]


def ancestors(nodes: Nodes, roots: Set[str]) -> Set[str]:
    """The roots and every node they depend on."""
    seen: Set[str] = set()
    todo = list(roots)
    while todo:
        key = todo.pop()
        if key in seen:
            continue
        seen.add(key)
        todo.extend(nodes[key][1])
    return seen


def frontier(nodes: Nodes, only: Set[str]) -> List[str]:
    """The nodes of `only` (found in one kernel and not the other) whose operands are all shared: where the
    two computations first part."""
    return [key for key in only if nodes[key][1] and all(child not in only for child in nodes[key][1])]


def describe(nodes: Nodes, key: str, depth: int = 2) -> str:
    label, children = nodes[key]
    if not children or depth == 0:
        return label if not children else label + "(..)"
    return label + "(" + ", ".join(describe(nodes, child, depth - 1) for child in children) + ")"


def phi_blind(nodes: Nodes) -> Tuple[Nodes, Dict[str, str]]:
    """The same graph with every phi made a leaf: node identities that see only the operations between
    control-flow merges, not which values a merge gathers (nor how a loop's exits are laid out). Returns
    the blind graph and the map from each node to its blind twin."""
    blind: Nodes = {}
    twin: Dict[str, str] = {}

    def visit(key: str) -> str:
        if key in twin:
            return twin[key]
        label, children = nodes[key]
        kids = [] if label == "phi" else [visit(child) for child in children]
        base = label.split(".")[0]
        if base in ("FFMA", "FMUL", "DFMA", "DMUL", "HFMA2", "HMUL2") and len(kids) >= 3:  # sign, factors, addend
            kids = kids[:1] + sorted(kids[1:3]) + kids[3:]
        elif base in ("FADD", "DADD", "FMNMX", "HADD2") and len(kids) >= 2:
            kids = sorted(kids[:2]) + kids[2:]
        result = hashlib.sha1((label + "(" + ",".join(kids) + ")").encode()).hexdigest()[:16]
        blind[result] = (label, kids)
        twin[key] = result
        return result

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 50000))
    try:
        for key in nodes:
            visit(key)
    finally:
        sys.setrecursionlimit(limit)
    return blind, twin

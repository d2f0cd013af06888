"""The float dataflow of a kernel's PTX, for comparing two kernels operation for operation.

nvcc -use_fast_math contracts multiply-adds into FMAs, and which product of `a * b + c * d` it fuses depends
on the code around the expression, not only on the expression: the same source compiled inside two kernels
can round differently. This turns each float value of a PTX kernel into a node (operation, operand nodes)
whose identity is a hash of its whole expression tree: loads are leaves named by what they read, integer
operands are one leaf, commutative operands are sorted. An operand is the set of definitions of its register
that reach that use along the kernel's control flow (a phi where several do; loop-carried ones drop out):
PTX reuses a virtual register for unrelated values in exclusive branches, and those never meet in a use.
Two kernels compute an expression the same way exactly when the node appears in both.

Used by tests/test_variant_3dgut.py (the 3DGUT lpt kernel against gsplat's eval3d forward kernel).
"""

from __future__ import annotations

import hashlib
import re
import sys
from typing import Callable, Dict, FrozenSet, List, Set, Tuple

Instruction = Tuple[str, List[str], bool]  # opcode ("label" for a branch target), operands, predicated
Nodes = Dict[str, Tuple[str, List[str]]]
_COMMUTATIVE = {"add", "mul", "min", "max"}
_FLOAT_REG = re.compile(r"%fd?\d+$")
_BITS_REG = re.compile(r"%r\d+$")  # 32-bit registers that may carry a float's bits across a branch
_ENDS_BLOCK = ("bra", "ret", "exit", "trap")


def kernel_instructions(ptx: str, entry_contains: str) -> List[Instruction]:
    """The labels and instructions of the first .entry whose name contains `entry_contains`, in order."""
    for part in re.split(r"\n(?=\.visible \.entry)", ptx):
        if part.startswith(".visible .entry") and entry_contains in part.split("(")[0]:
            body: List[Instruction] = []
            for line in part[part.index("{"):].splitlines():
                line = line.split("//")[0].strip()
                label = re.match(r"(\$?\w+):$", line)
                match = re.match(r"(@!?%p\d+\s+)?([a-z][\w.]*)\s*(.*);$", line)
                if label:
                    body.append(("label", [label.group(1)], False))
                elif match:
                    operands = [o.strip() for o in re.split(r",(?![^{]*})", match.group(3))] if match.group(3) else []
                    body.append((match.group(2), operands, match.group(1) is not None))
            return body
    raise KeyError(f"no .entry containing {entry_contains!r}")


def _control_flow(instructions: List[Instruction]) -> Tuple[List[Tuple[int, int]], List[List[int]]]:
    """Basic blocks (first, end) of the instruction list and the successors of each."""
    labels = {ops[0]: i for i, (op, ops, _) in enumerate(instructions) if op == "label"}
    starts = {0} | set(labels.values())
    starts |= {i + 1 for i, (op, _, _) in enumerate(instructions) if op.startswith(_ENDS_BLOCK)}
    starts = sorted(s for s in starts if s < len(instructions))
    blocks = [(s, starts[k + 1] if k + 1 < len(starts) else len(instructions)) for k, s in enumerate(starts)]
    block_at = {s: k for k, s in enumerate(starts)}
    successors = []
    for k, (_, end) in enumerate(blocks):
        op, ops, predicated = instructions[end - 1]
        targets = [block_at[labels[ops[0]]]] if op.startswith("bra") else []
        falls = not op.startswith(_ENDS_BLOCK) or predicated
        successors.append(targets + ([k + 1] if falls and k + 1 < len(blocks) else []))
    return blocks, successors


def dataflow(instructions: List[Instruction], leaf_name: Callable[[str, str, int], str]) -> Nodes:
    """Node hash -> (label, child hashes) for every float value defined in the kernel. `leaf_name(opcode,
    address, byte offset in a vector load)` names a load."""
    defs: List[Tuple[int, str, str, List[str]]] = []  # (instruction, register, kind or opcode, sources)
    defined_at: Dict[int, List[int]] = {}
    for i, (opcode, operands, _) in enumerate(instructions):
        if not operands or opcode == "label":
            continue
        found: List[Tuple[str, str, List[str]]] = []
        if operands[0].startswith("{") and opcode.startswith("ld."):
            found = [(register, "leaf", [leaf_name(opcode, operands[1], 4 * k)])
                     for k, register in enumerate(re.findall(r"%fd?\d+", operands[0]))]
        elif _FLOAT_REG.match(operands[0]) and not opcode.startswith(("st.", "setp")):
            found = [(operands[0], opcode, operands[1:])]
        elif _BITS_REG.match(operands[0]):
            # a float moved into an integer register (nvcc does this for values merged after branches)
            copies = opcode in ("mov.b32", "mov.u32") and bool(_FLOAT_REG.match(operands[1]) or _BITS_REG.match(operands[1]))
            found = [(operands[0], "copy", operands[1:]) if copies else (operands[0], "int", [])]
        for register, kind, sources in found:
            defined_at.setdefault(i, []).append(len(defs))
            defs.append((i, register, kind, sources))

    # reaching definitions: register -> the definitions that may hold its value, at each block's entry
    blocks, successors = _control_flow(instructions)
    predecessors: List[List[int]] = [[] for _ in blocks]
    for k, targets in enumerate(successors):
        for target in targets:
            predecessors[target].append(k)

    def run(state: Dict[str, FrozenSet[int]], first: int, end: int, uses: Dict[Tuple[int, str], FrozenSet[int]] = None):
        for i in range(first, end):
            if uses is not None:
                for operand in instructions[i][1][1:]:
                    if operand in state:
                        uses[(i, operand)] = state[operand]
            for d in defined_at.get(i, ()):
                register = defs[d][1]
                kept = state.get(register, frozenset()) if instructions[i][2] else frozenset()  # predicated: may not run
                state[register] = kept | {d}
        return state

    entry: List[Dict[str, FrozenSet[int]]] = [{} for _ in blocks]
    exit_: List[Dict[str, FrozenSet[int]]] = [run({}, *block) for block in blocks]
    changed = True
    while changed:
        changed = False
        for k, block in enumerate(blocks):
            merged: Dict[str, FrozenSet[int]] = {}
            for p in predecessors[k]:
                for register, ds in exit_[p].items():
                    merged[register] = merged.get(register, frozenset()) | ds
            if merged != entry[k]:
                entry[k] = merged
                out = run(dict(merged), *block)
                if out != exit_[k]:
                    exit_[k] = out
                    changed = True
    reaching: Dict[Tuple[int, str], FrozenSet[int]] = {}
    for k, block in enumerate(blocks):
        run(dict(entry[k]), *block, uses=reaching)

    nodes: Nodes = {}
    memo: Dict[int, str] = {}

    def node(label: str, children: List[str]) -> str:
        key = hashlib.sha1((label + "(" + ",".join(children) + ")").encode()).hexdigest()[:16]
        nodes[key] = (label, children)
        return key

    def value(i: int, register: str, stack: Tuple[int, ...]) -> str:
        members: Set[str] = set()
        for d in sorted(reaching.get((i, register), ())):
            if d in stack:  # loop-carried
                continue
            member = of_definition(d, stack)
            label, children = nodes[member]
            if label == "phi":
                members.update(children)
            elif label != "loop":
                members.add(member)
        if not members:
            return node("loop" if reaching.get((i, register)) else "undefined", [])
        return next(iter(members)) if len(members) == 1 else node("phi", sorted(members))

    def of_definition(d: int, stack: Tuple[int, ...] = ()) -> str:
        if d in memo:
            return memo[d]
        i, _, opcode, sources = defs[d]
        stack = stack + (d,)

        def operand(text: str) -> str:
            if _FLOAT_REG.match(text) or _BITS_REG.match(text):
                return value(i, text, stack)
            return node("int" if text.startswith("%") else text if text.startswith(("0f", "0d")) else "other", [])

        if opcode in ("leaf", "int"):
            result = node(sources[0] if opcode == "leaf" else "int", [])
        elif opcode == "copy" or (opcode.startswith("mov.b") and (_BITS_REG.match(sources[0]) or _FLOAT_REG.match(sources[0]))):
            result = value(i, sources[0], stack)
        elif opcode.startswith("ld."):
            result = node(leaf_name(opcode, sources[0], 0), [])
        elif opcode.startswith("mov.b"):
            result = node("bits", [])
        elif opcode.startswith("mov.f"):
            result = operand(sources[0])
        elif opcode.startswith("cvt") and not _FLOAT_REG.match(sources[0]):
            result = node("from-int", [])
        else:
            children = [operand(s) for s in sources]
            base = opcode.split(".")[0]
            if base in _COMMUTATIVE:
                children = sorted(children)
            elif base == "fma":
                children = sorted(children[:2]) + children[2:]
            elif base == "selp":
                children = sorted(children[:2])
            # .rn on mul/add (explicit rounding, never contracted by ptxas) is kept apart from the plain forms
            result = node(opcode.replace(".ftz", "").replace(".f32", ""), children)
        memo[d] = result
        return result

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))  # expression chains are deep (a few thousand operations)
    try:
        for d in range(len(defs)):
            of_definition(d)
    finally:
        sys.setrecursionlimit(limit)
    return nodes


def ancestors(nodes: Nodes, label_prefix: str) -> Set[str]:
    """Every node an operation labelled `label_prefix...` depends on, those operations included."""
    seen: Set[str] = set()
    todo = [key for key, (label, _) in nodes.items() if label.startswith(label_prefix)]
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
    return [key for key in only if all(child not in only for child in nodes[key][1])]


def describe(nodes: Nodes, key: str, depth: int = 2) -> str:
    label, children = nodes[key]
    if not children or depth == 0:
        return label if not children else label + "(..)"
    return label + "(" + ", ".join(describe(nodes, child, depth - 1) for child in children) + ")"

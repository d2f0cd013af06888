"""The float dataflow of a kernel's PTX, for comparing two kernels operation for operation.

nvcc -use_fast_math contracts multiply-adds into FMAs, and which product of `a * b + c * d` it fuses depends
on the code around the expression, not only on the expression: the same source compiled inside two kernels
can round differently. This turns each float register of a PTX kernel into a node (operation, operand nodes)
whose identity is a hash of its whole expression tree: loads are leaves named by what they read, integer
operands are one leaf, commutative operands are sorted, registers written in several places are the set of
their definitions (loop-carried ones drop out). Two kernels compute an expression the same way exactly when
the node appears in both.

Used by tests/test_variant_3dgut.py (the 3DGUT lpt kernel against gsplat's eval3d forward kernel).
"""

from __future__ import annotations

import collections
import hashlib
import re
from typing import Callable, Dict, List, Set, Tuple

Instruction = Tuple[str, List[str]]
_COMMUTATIVE = {"add", "mul", "min", "max"}
_FLOAT_REG = re.compile(r"%fd?\d+$")
_BITS_REG = re.compile(r"%r\d+$")  # 32-bit registers that may carry a float's bits across a branch


def kernel_instructions(ptx: str, entry_contains: str) -> List[Instruction]:
    """(opcode, operands) of every instruction of the first .entry whose name contains `entry_contains`."""
    for part in re.split(r"\n(?=\.visible \.entry)", ptx):
        if part.startswith(".visible .entry") and entry_contains in part.split("(")[0]:
            body = []
            for line in part.splitlines():
                match = re.match(r"\s*(@!?%p\d+\s+)?([a-z][\w.]*)\s+(.*);", line)
                if match:
                    body.append((match.group(2), [o.strip() for o in re.split(r",(?![^{]*})", match.group(3))]))
            return body
    raise KeyError(f"no .entry containing {entry_contains!r}")


def dataflow(instructions: List[Instruction], leaf_name: Callable[[str, str], str]) -> Dict[str, Tuple[str, List[str]]]:
    """Node hash -> (label, child hashes) for every float register's value. `leaf_name(opcode, address)`
    names a load."""
    definitions: Dict[str, List[Tuple[str, List[str]]]] = collections.defaultdict(list)
    for opcode, operands in instructions:
        if not operands:
            continue
        if operands[0].startswith("{") and opcode.startswith("ld."):
            for k, register in enumerate(re.findall(r"%fd?\d+", operands[0])):
                definitions[register].append(("leaf", [leaf_name(opcode, operands[1], 4 * k)]))
        elif _FLOAT_REG.match(operands[0]) and not opcode.startswith(("st.", "setp")):
            definitions[operands[0]].append((opcode, operands[1:]))
        elif _BITS_REG.match(operands[0]):
            # a float moved into an integer register (nvcc does this for values merged after branches)
            if opcode in ("mov.b32", "mov.u32") and (_FLOAT_REG.match(operands[1]) or _BITS_REG.match(operands[1])):
                definitions[operands[0]].append(("copy", operands[1:]))
            else:
                definitions[operands[0]].append(("int", []))

    nodes: Dict[str, Tuple[str, List[str]]] = {}
    memo: Dict[str, str] = {}

    def node(label: str, children: List[str]) -> str:
        key = hashlib.sha1((label + "(" + ",".join(children) + ")").encode()).hexdigest()[:16]
        nodes[key] = (label, children)
        return key

    def one(opcode: str, sources: List[str], stack: Tuple[str, ...]) -> str:
        def operand(text: str) -> str:
            if _FLOAT_REG.match(text):
                return value(text, stack)
            if text.startswith("%"):
                return node("int", [])
            return node(text if text.startswith(("0f", "0d")) else "other", [])

        if opcode == "leaf":
            return node(sources[0], [])
        if opcode == "int":
            return node("int", [])
        if opcode == "copy":
            return value(sources[0], stack)
        if opcode.startswith("ld."):
            return node(leaf_name(opcode, sources[0], 0), [])
        if opcode.startswith("mov.b"):
            return value(sources[0], stack) if _BITS_REG.match(sources[0]) or _FLOAT_REG.match(sources[0]) else node("bits", [])
        if opcode.startswith("mov.f"):
            return operand(sources[0])
        if opcode.startswith("cvt") and not _FLOAT_REG.match(sources[0]):
            return node("from-int", [])
        children = [operand(s) for s in sources]
        base = opcode.split(".")[0]
        if base in _COMMUTATIVE:
            children = sorted(children)
        elif base == "fma":
            children = sorted(children[:2]) + children[2:]
        elif base == "selp":
            children = sorted(children[:2])
        # .rn on mul/add (explicit rounding, never contracted by ptxas) is kept apart from the plain forms
        return node(opcode.replace(".ftz", "").replace(".f32", ""), children)

    def value(register: str, stack: Tuple[str, ...] = ()) -> str:
        if register in memo:
            return memo[register]
        defs = definitions.get(register)
        if not defs:
            return node("undefined", [])
        if register in stack:
            return node("loop", [])
        inner = stack + (register,)
        if len(defs) == 1:
            result = one(defs[0][0], defs[0][1], inner)
        else:
            members: Set[str] = set()
            for opcode, sources in defs:
                member = one(opcode, sources, inner)
                label, children = nodes[member]
                if label == "phi":
                    members.update(children)
                elif label != "loop":
                    members.add(member)
            result = next(iter(members)) if len(members) == 1 else node("phi", sorted(members))
        memo[register] = result
        return result

    for register in definitions:
        value(register)
    return nodes


def ancestors(nodes: Dict[str, Tuple[str, List[str]]], label_prefix: str) -> Set[str]:
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


def describe(nodes: Dict[str, Tuple[str, List[str]]], key: str, depth: int = 2) -> str:
    label, children = nodes[key]
    if not children or depth == 0:
        return label if not children else label + "(..)"
    return label + "(" + ", ".join(describe(nodes, child, depth - 1) for child in children) + ")"

"""The 3DGUT lpt kernel against gsplat's eval3d forward kernel, float instruction for float instruction (SASS).

No GPU needed: it needs nvcc and cuobjdump (CUDA 12.8 or newer for sm_90 of the same toolkit the GPU machine
builds with), torch's headers and the installed gsplat. It compiles

- gsplat's own csrc/RasterizeToPixelsFromWorld3DGSFwd.cu as gsplat's JIT build does (torch.utils.cpp_extension
  with gsplat/cuda/_backend.py's flags: -O3, -use_fast_math unless NO_FAST_MATH=1, torch's COMMON_NVCC_FLAGS,
  -std=c++17, -gencode for sm_XX), the whole file: nvcc's contraction of an expression depends on the code
  around it, down to the other channel counts instantiated in the same file;
- kernels/blend_3dgut.cu as the runtime has CuPy's nvcc backend compile it (runtime.kernel_source with the
  3-channel exports for a CTA of 256 threads, tile size 16, or --threads; -gencode=arch=compute_XX,code=sm_XX --cubin, -std=c++17 -I kernels, the
  variant's compile_options, CuPy's include folders and its -ftz=true),

dumps both with cuobjdump -sass and compares the float dataflow (tests/sass_dataflow.py) of everything the
alphas depend on (the ancestors of MUFU.EX2: the camera models, the pose, the world ray, the staged
Gaussian and the response) in gsplat's 3-channel kernel and each of our persistent lpt kernels (the build with
last_ids, the one without them that inference calls run, and both builds for latency-bound frames):

- "exact": the nodes (whole expression trees through control-flow merges) only one kernel has, where the
  two first part;
- "between merges": the same with every merge (phi) a leaf, which sees every float instruction and its
  operands but not how the merges and loop exits are laid out.

Exit status 0 when the "between merges" comparison finds no float operation of one kernel that the other
lacks, 1 otherwise.

    python3 tests/device/sass_3dgut.py [--arch 90] [--threads 256] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import sass_dataflow as sd  # noqa: E402

# torch.utils.cpp_extension.COMMON_NVCC_FLAGS (torch 2.x)
TORCH_FLAGS = ["-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
               "-D__CUDA_NO_HALF2_OPERATORS__", "--expt-relaxed-constexpr"]
GSPLAT_KERNEL = "rasterize_to_pixels_from_world_3dgs_fwd_kernelILj3EfEE"
GSPLAT_FTHETA_PARAMETER = 26  # ftheta_coeffs, by value, in gsplat's kernel signature
KERNEL_PARAMETERS = 0x210  # sm_90: kernel parameters start at c[0x0][0x210]


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        nvcc = shutil.which("nvcc")
        candidate = Path(nvcc).resolve().parent / name if nvcc else None
        if candidate is None or not candidate.is_file():
            raise SystemExit(f"{name} not found (PATH)")
        found = str(candidate)
    return found


def run(command: List[str], cwd: Path) -> None:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(" ".join(command) + "\n" + result.stderr[-4000:])


def compile_gsplat(work: Path, arch: str) -> Path:
    import torch.utils.cpp_extension as cpp

    from gsplat_lpt.variants import gaussian3dgut

    cuda = gaussian3dgut.gsplat_cuda_dir()
    includes = [f"-I{cuda / 'include'}", f"-I{cuda / 'csrc' / 'third_party' / 'glm'}"]
    includes += [f"-I{path}" for path in cpp.include_paths()]
    # a CPU-only torch lacks this generated header of its CUDA build; it only holds a build macro
    stub = work / "stub"
    if not any((Path(p) / "c10/cuda/impl/cuda_cmake_macros.h").is_file() for p in cpp.include_paths()):
        (stub / "c10/cuda/impl").mkdir(parents=True, exist_ok=True)
        (stub / "c10/cuda/impl/cuda_cmake_macros.h").write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
        includes.append(f"-I{stub}")
    flags = ["-O3"] + ([] if os.environ.get("NO_FAST_MATH", "0") == "1" else ["-use_fast_math"])
    output = work / "gsplat.o"
    run([tool("nvcc"), *includes, *TORCH_FLAGS, f"-gencode=arch=compute_{arch},code=sm_{arch}", *flags, "-std=c++17",
         "-DTORCH_EXTENSION_NAME=gsplat_cuda", "-DTORCH_API_INCLUDE_EXTENSION_H", "-c",
         str(cuda / "csrc" / "RasterizeToPixelsFromWorld3DGSFwd.cu"), "-o", str(output)], work)
    run([tool("cuobjdump"), "-xelf", "all", str(output)], work)
    return next(work.glob("gsplat.*.cubin"))


def compile_ours(work: Path, arch: str, threads: int) -> Path:
    from cupy._core import core

    from gsplat_lpt import runtime
    from gsplat_lpt.variants import VARIANTS

    variant = VARIANTS["rasterize_to_pixels_eval3d"]
    source = work / "blend_3dgut.cu"
    source.write_text(runtime.kernel_source(variant.kernel_source, variant.kernel_structs(),
                                            variant.extra_checks() + variant.export_line(3, threads)))
    cupy = [f"-I{core._get_header_dir_path()}", *core._get_cccl_include_options()]
    output = work / "ours.cubin"
    run([tool("nvcc"), f"-gencode=arch=compute_{arch},code=sm_{arch}", "--cubin", "-std=c++17",
         f"-I{runtime.kernel_dir()}", *variant.compile_options(), *cupy, "-ftz=true", str(source), "-o", str(output)],
        work)
    return output


def elf_info(cubin: Path, kernel: str) -> str:
    elf = subprocess.run([tool("cuobjdump"), "-elf", str(cubin)], capture_output=True, text=True).stdout
    for section in re.split(r"\n(?=\.nv\.info\.)", elf):
        if section.startswith(".nv.info.") and kernel in section.split("\n")[0]:
            return section
    raise SystemExit(f"no .nv.info section for {kernel} in {cubin}")


def indirect_branches(info: str) -> Dict[int, List[int]]:
    return {int(m.group(1), 16): [int(t, 16) for t in m.group(2).split()]
            for m in re.finditer(r"Offset of Indirect Branch: (0x[0-9a-f]+)\s+Number of targets: \d+\s+Targets: ([0-9a-fx ]+)",
                                 info)}


def parameter_offset(info: str, ordinal: int) -> int:
    found = re.search(rf"Ordinal : {ordinal:#x}\s+Offset\s*: (0x[0-9a-f]+)", info)
    return KERNEL_PARAMETERS + int(found.group(1), 16)


def leaf_namer(ftheta: int):
    """Loads named by what they read: gsplat's FTheta struct (a kernel parameter of its own, a field of our
    Params) by its byte offset, global loads by their offset from the base register (viewmats, Ks and
    coefficients per image), shared memory as one leaf, other kernel parameters as one (integers)."""
    size = 68  # sizeof(FThetaCameraDistortionParameters)

    def name(opcode: str, address: str, extra: int) -> str:
        base = opcode.split(".")[0]
        constant = re.match(r"c\[0x0\]\[(0x[0-9a-f]+)\]$", address)
        if base in ("LDC", "ULDC") and constant:
            at = int(constant.group(1), 16) + extra - ftheta
            return f"ftheta+{at}" if 0 <= at < size else "param"
        if base == "LDS":
            return "shared"
        if base == "LDG":
            offset = re.search(r"\+(0x[0-9a-f]+)\]$", address)
            return f"global+{(int(offset.group(1), 16) if offset else 0) + extra}"
        return f"{base}:{address}" + (f"@{extra}" if extra else "")

    return name


def analyse(cubin: Path, kernel: str, ftheta: int):
    sass = subprocess.run([tool("cuobjdump"), "-sass", str(cubin)], capture_output=True, text=True).stdout
    code = sd.instructions(sass, kernel)
    nodes, defined = sd.dataflow(code, leaf_namer(ftheta), indirect_branches(elf_info(cubin, kernel)))
    roots = {n for k, ns in defined.items() if code[k].opcode.startswith("MUFU.EX2") for n in ns}
    return code, nodes, defined, sd.ancestors(nodes, roots)


def addresses(code, defined, keys, twin=None) -> Dict[str, List[str]]:
    found: Dict[str, List[str]] = {}
    for k, ns in defined.items():
        for n in ns:
            key = twin[n] if twin is not None else n
            if key in keys:
                found.setdefault(key, []).append(f"{code[k].address:#06x}")
    return found


FLOAT_OPERATION = re.compile(r"^(FFMA|FMUL|FADD|FMNMX|FSEL|FSETP|MUFU|FRND|FCHK|F2F|F2I|DFMA|DMUL|DADD|DSETP|phi)")


def report(title: str, nodes, only, code, defined, twin=None) -> List[str]:
    """The frontier of `only`: its float operations whose operands both kernels compute (integer index
    arithmetic, which differs between the kernels by design, left out)."""
    frontier = [k for k in sd.frontier(nodes, only) if FLOAT_OPERATION.match(nodes[k][0])
                and not nodes[k][0].startswith("I2F")]
    at = addresses(code, defined, set(frontier), twin)
    print(f"  {title}: {len(frontier)}")
    for key in sorted(frontier, key=lambda k: at.get(k, ["~"])[0]):
        print(f"    {','.join(at.get(key, ['(merge)'])[:4]):<28} {sd.describe(nodes, key, 3)[:400]}")
    return frontier


def main(argv) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arch", default="90")
    parser.add_argument("--threads", type=int, default=256, help="our kernel's CTA size (64 for tile size 8)")
    parser.add_argument("--keep", type=Path, help="keep the sources, cubins and SASS in this folder")
    args = parser.parse_args(argv)
    from gsplat_lpt.variants.gaussian3dgut import VARIANT, Params3DGUT

    our_kernels = [VARIANT.kernel_names(3, args.threads)[0], VARIANT.no_last_ids_kernel_name(3, args.threads)]
    if VARIANT.latency_bound_build:  # (the builds for latency-bound frames, whose walk pairs the evaluations)
        our_kernels += list(VARIANT.latency_bound_kernel_names(3, args.threads))
    work = Path(tempfile.mkdtemp(prefix="sass_3dgut_")) if args.keep is None else args.keep
    work.mkdir(parents=True, exist_ok=True)

    print("compiling gsplat's RasterizeToPixelsFromWorld3DGSFwd.cu (about a minute) and kernels/blend_3dgut.cu ...")
    theirs_cubin, ours_cubin = compile_gsplat(work, args.arch), compile_ours(work, args.arch, args.threads)
    gsplat_ftheta = parameter_offset(elf_info(theirs_cubin, GSPLAT_KERNEL), GSPLAT_FTHETA_PARAMETER)
    gc, gn, gd, ga = analyse(theirs_cubin, GSPLAT_KERNEL, gsplat_ftheta)
    if args.keep is not None:
        for cubin in (theirs_cubin, ours_cubin):
            (work / (cubin.stem + ".sass")).write_text(
                subprocess.run([tool("cuobjdump"), "-sass", str(cubin)], capture_output=True, text=True).stdout)
    fused = lambda code: sum(1 for ins in code if ins.opcode.startswith("FFMA"))  # noqa: E731
    print(f"gsplat {GSPLAT_KERNEL[:46]}...: {len(gc)} instructions ({fused(gc)} FFMA), {len(ga)} values feed alpha")
    gb, gt = sd.phi_blind(gn)
    gba = {gt[k] for k in ga}
    differs = False
    for our_kernel in our_kernels:
        our_ftheta = parameter_offset(elf_info(ours_cubin, our_kernel), 1) + Params3DGUT.ftheta_coeffs.offset
        oc, on, od, oa = analyse(ours_cubin, our_kernel, our_ftheta)
        print(f"\nours   {our_kernel}: {len(oc)} instructions ({fused(oc)} FFMA), {len(oa)} values feed alpha")
        print(f"exact (whole expression trees): {len(ga & oa)} values in both")
        report("gsplat only", gn, ga - oa, gc, gd)
        report("ours only", on, oa - ga, oc, od)

        ob, ot = sd.phi_blind(on)
        oba = {ot[k] for k in oa}
        print(f"between merges (every phi a leaf): {len(gba & oba)} values in both")
        theirs = report("gsplat only", gb, gba - oba, gc, gd, gt)
        ours = report("ours only", ob, oba - gba, oc, od, ot)
        differs = differs or bool(theirs or ours)
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

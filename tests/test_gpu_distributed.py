"""Two GPUs of one host: gsplat's own `rasterization(..., distributed=True)` with backend="cuda" and with
backend="lpt", in two processes joined with NCCL, against one GPU rendering all Gaussians.

How gsplat 1.5.3 wants `distributed=True` called (gsplat/rendering.py, gsplat/distributed.py):
- a torch.distributed process group is initialised (NCCL: its helpers all-gather CUDA tensors) and each
  process has called torch.cuda.set_device(its GPU) first;
- each rank passes ITS OWN subset of the Gaussians (any count N_r), on its own GPU, with per-Gaussian
  colours ([N_r, D] or SH [N_r, K, 3]; per-camera colours are refused), no batch dimensions, no absgrad;
- each rank passes the SAME number of cameras C (not checked by gsplat: unequal counts break the
  all-gather), and gets back the images of its own cameras;
- inside, the cameras are all-gathered, every rank projects its Gaussians into every camera, and
  radii, means2d, depths, conics, opacities and colours are exchanged all-to-all (packed: also camera
  and Gaussian ids), so each rank rasterizes its cameras with the Gaussians of all ranks, concatenated
  in rank order; that last step is the `rasterize_to_pixels` call the lpt backend takes over.
Run with 2 GPUs (gsplat's CUDA extension built beforehand: each process would otherwise build it).
"""

from __future__ import annotations

import os
import socket
import time
from datetime import timedelta

import pytest
import torch
import torch.multiprocessing as mp

from helpers import cameras, psnr, random_gaussians

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs of one host"),
]

WORLD = 2
CAMERAS_PER_RANK = 2
WIDTH, HEIGHT = 160, 96


def scene():
    """All Gaussians (with one heavy clump, so chunking has work) and per-Gaussian colours, on the CPU."""
    means, quats, scales, opacities = random_gaussians(3000, seed=3, device="cpu", cluster=1500)
    colors = torch.rand(means.shape[0], 3, generator=torch.Generator().manual_seed(4))
    return means, quats, scales, opacities, colors


def rank_part(rank: int):
    """Rank r owns Gaussians r, r + 2, ... and cameras [2r, 2r + 2)."""
    gaussians = [tensor[rank::WORLD] for tensor in scene()]
    viewmats, Ks = cameras(WORLD * CAMERAS_PER_RANK, WIDTH, HEIGHT, device="cpu")
    own = slice(rank * CAMERAS_PER_RANK, (rank + 1) * CAMERAS_PER_RANK)
    return gaussians, viewmats[own], Ks[own]


def distributed_worker(rank: int, port: int, out_dir: str, packed: bool) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=WORLD, timeout=timedelta(seconds=300))
    try:
        import gsplat

        import gsplat_lpt

        device = torch.device("cuda", rank)
        gaussians, viewmats, Ks = rank_part(rank)
        means, quats, scales, opacities, colors = [t.to(device) for t in gaussians]
        results = {}
        runs = {"cuda": {}, "lpt": {"lpt_config": gsplat_lpt.LPTConfig(mode="lpt")},
                "auto": {"lpt_config": gsplat_lpt.LPTConfig(mode="auto", overhead_lambda=0.0, min_gain=0.0,
                                                                  heavy_item_pace=1.0, chunked_cost_floor=0.0)}}
        for name, extra in runs.items():
            image, alpha, meta = gsplat.rasterization(
                means, quats, scales, opacities, colors, viewmats.to(device), Ks.to(device), WIDTH, HEIGHT,
                packed=packed, distributed=True, backend="cuda" if name == "cuda" else "lpt", **extra)
            results[name] = (image.cpu(), alpha.cpu(), dict(meta.get("lpt") or {}) if name != "cuda" else {})
        torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_two_processes(out_dir, packed: bool, limit_s: float = 600.0) -> None:
    context = mp.spawn(distributed_worker, args=(free_port(), str(out_dir), packed), nprocs=WORLD, join=False)
    deadline = time.monotonic() + limit_s
    while not context.join(timeout=5):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.terminate()
            pytest.fail(f"distributed rendering did not finish within {limit_s:.0f} s")


@pytest.mark.parametrize("packed", [False, pytest.param(True, marks=pytest.mark.skip(
    reason="packed=True with distributed=True hung past 150 s on two H200s (the worker renders backend='cuda' "
           "first; not isolated further): gsplat 1.5.3's packed all-to-all path"))])
def test_distributed_rasterization_with_both_backends(tmp_path, packed):
    import gsplat

    import gsplat_lpt  # noqa: F401  (backend= on gsplat.rasterization)

    run_two_processes(tmp_path, packed)
    # One GPU, all Gaussians in the order the ranks concatenate them (rank 0's, then rank 1's), all cameras.
    parts = [rank_part(rank)[0] for rank in range(WORLD)]
    means, quats, scales, opacities, colors = [torch.cat([part[i] for part in parts]).cuda() for i in range(5)]
    viewmats, Ks = cameras(WORLD * CAMERAS_PER_RANK, WIDTH, HEIGHT, device="cuda")
    reference, reference_alpha, _ = gsplat.rasterization(means, quats, scales, opacities, colors, viewmats, Ks,
                                                         WIDTH, HEIGHT, packed=packed, backend="cuda")
    for rank in range(WORLD):
        results = torch.load(tmp_path / f"rank{rank}.pt")
        own = slice(rank * CAMERAS_PER_RANK, (rank + 1) * CAMERAS_PER_RANK)
        image_cuda, alpha_cuda, _ = results["cuda"]
        assert image_cuda.shape == (CAMERAS_PER_RANK, HEIGHT, WIDTH, 3)
        assert float(alpha_cuda.max()) > 0.5  # something was rendered
        # gsplat distributed == gsplat on one GPU with every Gaussian
        assert torch.allclose(image_cuda, reference[own].cpu(), atol=1e-5)
        assert torch.allclose(alpha_cuda, reference_alpha[own].cpu(), atol=1e-5)
        # backend="lpt" inside distributed=True: LPT-only is gsplat's output, chunked within the PSNR bound
        image_lpt, alpha_lpt, schedule = results["lpt"]
        assert schedule.get("mode") == "lpt"
        assert (image_lpt - image_cuda).abs().max() <= 1e-6 and (alpha_lpt - alpha_cuda).abs().max() <= 1e-6
        image_auto, _, schedule = results["auto"]
        assert schedule.get("mode") == "auto"
        assert psnr(image_auto, image_cuda) >= 76.0

"""gsplat_lpt/tools/distributed.py on the CPU: two processes joined with gloo (as torchrun would start them)
deal frames round-robin and gather the results on rank 0, in order; render's write path through it."""

import json
import os
import socket

import pytest
import torch
import torch.multiprocessing as mp

from gsplat_lpt.tools.distributed import Workers

WORLD = 2


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def join_as_torchrun_would(rank: int, port: int) -> Workers:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE=str(WORLD))
    workers = Workers.from_environment()
    assert workers.is_distributed and workers.rank == rank and workers.device.type == "cpu"
    return workers


def fake_frame_work(frame: int):
    """Stands in for rendering a frame: what was done, and by whom."""
    return {"frame": frame, "rank": int(os.environ["RANK"]), "value": frame * frame}


def dealing_worker(rank: int, port: int, out_dir: str, frames: int) -> None:
    with join_as_torchrun_would(rank, port) as workers:
        mine = workers.shard(range(frames))
        gathered = workers.gather([fake_frame_work(frame) for frame in mine])
        streamed = list(workers.imap(range(frames), fake_frame_work))
        told = workers.broadcast(f"from rank {rank}")
        try:
            workers.on_main(lambda: (_ for _ in ()).throw(ValueError("rank 0 refused")), errors=(ValueError,))
            refused = None
        except ValueError as error:
            refused = str(error)
        record = {"mine": mine, "gathered": gathered, "streamed": streamed, "told": told, "refused": refused}
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as handle:
            json.dump(record, handle)


@pytest.mark.parametrize("frames", [5, 1])
def test_frames_are_dealt_round_robin_and_gathered_in_order_on_rank_0(tmp_path, frames):
    mp.spawn(dealing_worker, args=(free_port(), str(tmp_path), frames), nprocs=WORLD, join=True)
    rank0 = json.loads((tmp_path / "rank0.json").read_text())
    rank1 = json.loads((tmp_path / "rank1.json").read_text())
    assert rank0["mine"] == list(range(0, frames, 2)) and rank1["mine"] == list(range(1, frames, 2))
    expected = [{"frame": f, "rank": f % WORLD, "value": f * f} for f in range(frames)]
    assert rank0["gathered"] == expected and rank1["gathered"] is None
    assert rank0["streamed"] == [[f, row] for f, row in enumerate(expected)] and rank1["streamed"] == []
    assert rank0["told"] == rank1["told"] == "from rank 0"
    assert rank0["refused"] == rank1["refused"] == "rank 0 refused"  # both stop together


def test_single_process_without_torchrun(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    workers = Workers.from_environment()
    assert not workers.is_distributed and workers.is_main and not workers.joined
    assert workers.shard("abc") == ["a", "b", "c"] and workers.gather([1, 2]) == [1, 2]
    assert list(workers.imap([3, 4], lambda x: -x)) == [(3, -3), (4, -4)]
    assert workers.on_main(lambda: 7) == 7 and workers.broadcast("x") == "x"


def fake_render_frame(device_scene, frame, backend, config, backgrounds, tile_size=16):
    """Stands in for one gsplat.rasterization call: a flat image whose value encodes the frame."""
    images = torch.full((device_scene.cameras_per_frame, 8, 12, 3), 10 * frame, dtype=torch.uint8).numpy()
    return images, {"frame": frame, "rendered_by": int(os.environ["RANK"])}


def render_worker(rank: int, port: int, out_dir: str) -> None:
    import gsplat_lpt.tools.render as render_module
    from gsplat_lpt.scenes import make_scene

    render_module.render_frame = fake_render_frame
    with join_as_torchrun_would(rank, port) as workers:
        scene = make_scene("balanced", width=12, height=8, scale=0.001, frames=5)
        result = render_module.render_scene(scene, out_dir, backend="cuda", video=os.path.join(out_dir, "v.gif"),
                                            progress=False, workers=workers)
        with open(os.path.join(out_dir, f"result{rank}.json"), "w") as handle:
            json.dump(result, handle)


def test_render_gathers_frames_on_rank_0_which_alone_writes(tmp_path):
    import imageio.v2 as imageio

    mp.spawn(render_worker, args=(free_port(), str(tmp_path)), nprocs=WORLD, join=True)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [f"frame_{f:04d}.png" for f in range(5)] + ["render.json", "result0.json", "result1.json", "v.gif"]
    for frame in range(5):
        assert (imageio.imread(tmp_path / f"frame_{frame:04d}.png") == 10 * frame).all()
    schedules = json.loads((tmp_path / "render.json").read_text())["frames"]
    assert [s["frame"] for s in schedules] == list(range(5))
    assert [s["rendered_by"] for s in schedules] == [0, 1, 0, 1, 0]  # both GPUs worked
    assert len(imageio.mimread(tmp_path / "v.gif")) == 5
    assert json.loads((tmp_path / "result1.json").read_text()) == {"images": [], "schedules": []}

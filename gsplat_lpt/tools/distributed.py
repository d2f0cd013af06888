"""Spreading frames over the GPUs of one host: one process per GPU, started by torchrun.

    torchrun --nproc-per-node 2 -m gsplat_lpt render --scene street --frames 60 --out frames/

torchrun starts the processes and sets RANK, WORLD_SIZE and LOCAL_RANK (plus MASTER_ADDR/PORT).
`Workers.from_environment()` joins the process group (NCCL between GPUs, gloo without CUDA) and binds
the process to GPU LOCAL_RANK. Frames are dealt round-robin: in round r, rank i takes frame
r * world_size + i (`shard`, `imap`); results are gathered on rank 0 (`gather`, `imap`), which alone
writes files and prints. Without torchrun (WORLD_SIZE unset or 1) everything runs in this one process
and no process group is created.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence, Tuple, TypeVar

import torch

Item = TypeVar("Item")
Result = TypeVar("Result")


class DistributedError(RuntimeError):
    """The process layout cannot work (e.g. more processes on a host than GPUs)."""


@dataclass
class Workers:
    """This process's place among the processes rendering one job."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    joined: bool = False  # this object created the process group (and destroys it in close())

    @property
    def is_main(self) -> bool:
        """Rank 0: the one process that writes files and prints."""
        return self.rank == 0

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1

    @property
    def device(self) -> torch.device:
        """This process's GPU (cuda:LOCAL_RANK), or the CPU on a machine without CUDA."""
        return torch.device("cuda", self.local_rank) if torch.cuda.is_available() else torch.device("cpu")

    @classmethod
    def from_environment(cls, backend: Optional[str] = None) -> "Workers":
        """The layout torchrun describes in the environment; a single process when there is none."""
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        if world_size <= 1:
            return cls()
        import torch.distributed as dist

        rank = int(os.environ["RANK"])
        local_rank = int(os.environ.get("LOCAL_RANK", rank))
        if torch.cuda.is_available():
            visible = torch.cuda.device_count()
            if local_rank >= visible:
                raise DistributedError(f"LOCAL_RANK {local_rank} but this host shows {visible} GPU(s): start at most "
                                       f"{visible} process(es) per host (torchrun --nproc-per-node {visible})")
            torch.cuda.set_device(local_rank)  # before any collective: NCCL binds the communicator to it
        joined = False
        if not dist.is_initialized():
            dist.init_process_group(backend or ("nccl" if torch.cuda.is_available() else "gloo"))
            joined = True
        return cls(rank=dist.get_rank(), world_size=dist.get_world_size(), local_rank=local_rank, joined=joined)

    # ------------------------------------------------------------------------------------------ dealing

    def shard(self, items: Iterable[Item]) -> List[Item]:
        """This rank's items, round-robin: rank i of n takes items i, i + n, i + 2n, ..."""
        return list(items)[self.rank::self.world_size]

    def gather(self, values: Sequence[Result]) -> Optional[List[Result]]:
        """The per-rank results of `shard(items)` back in item order on rank 0; None on the other ranks.

        Every rank must call it (a collective). Values travel pickled (torch.distributed.gather_object)."""
        if not self.is_distributed:
            return list(values)
        import torch.distributed as dist

        parts: Optional[List[Any]] = [None] * self.world_size if self.is_main else None
        dist.gather_object(list(values), parts, dst=0)
        if not self.is_main:
            return None
        merged: List[Result] = []
        for index in range(max(len(part) for part in parts)):
            merged += [part[index] for part in parts if index < len(part)]
        return merged

    def imap(self, items: Iterable[Item], work: Callable[[Item], Result]) -> Iterator[Tuple[Item, Result]]:
        """`work(item)` for this rank's items, gathered round by round: rank 0 yields every (item, result)
        in item order as each round completes (so it can write while the others work on); other ranks
        yield nothing. Every rank must exhaust the iterator."""
        items = list(items)
        for start in range(0, len(items), self.world_size):
            index = start + self.rank
            local = [work(items[index])] if index < len(items) else []
            gathered = self.gather(local)
            if gathered is not None:
                for offset, result in enumerate(gathered):
                    yield items[start + offset], result

    # ------------------------------------------------------------------------------------------ agreeing

    def broadcast(self, value: Any) -> Any:
        """Rank 0's `value` on every rank."""
        if not self.is_distributed:
            return value
        import torch.distributed as dist

        box = [value if self.is_main else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def on_main(self, action: Callable[[], Any], errors: Tuple[type, ...] = (Exception,)) -> Any:
        """Run `action` on rank 0 only; its result, or the error it raised (one of `errors`), reaches every
        rank, so that all processes go on together or stop together."""
        outcome: Tuple[bool, Any] = (True, None)
        if self.is_main:
            try:
                outcome = (True, action())
            except errors as error:
                outcome = (False, error)
        ok, value = self.broadcast(outcome)
        if not ok:
            raise value
        return value

    def barrier(self) -> None:
        if self.is_distributed:
            import torch.distributed as dist

            dist.barrier()

    def close(self) -> None:
        """Leave the process group if this object created it."""
        if self.joined:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
            self.joined = False

    def __enter__(self) -> "Workers":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

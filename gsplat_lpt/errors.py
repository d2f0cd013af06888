"""The exceptions a user of the backend can meet."""

from __future__ import annotations

from typing import Optional

from . import constants


class LPTInputError(ValueError):
    """A rasterize argument that the LPT backend cannot render (named in the message)."""


class LPTRuntimeError(RuntimeError):
    """The GPU side failed: CuPy missing or failing to compile, a kernel that cannot fit this GPU."""


def describe_errors(bits: int, where: str) -> Optional[str]:
    """The message of a frame's error bits (constants.ERROR_*), or None where there are none."""
    if not bits:
        return None
    reasons = "; ".join(message for bit, message in constants.ERROR_MESSAGES.items() if bits & bit)
    return f"invalid rasterize input in {where}: {reasons}"

"""The exceptions a user of the backend can meet."""


class LPTInputError(ValueError):
    """A rasterize argument that the LPT backend cannot render (named in the message)."""


class LPTRuntimeError(RuntimeError):
    """The GPU side failed: CuPy missing or failing to compile, a kernel that cannot fit this GPU."""

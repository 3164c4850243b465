"""Sizes as people read them."""


def format_bytes(size: int) -> str:
    """A message size as the checks print it, on both sides of a job (4 KiB, 64 MiB, 1000 B)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"

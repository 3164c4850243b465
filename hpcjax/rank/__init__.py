"""What runs on every rank: map the environment (`mapping`, with one reader per
launcher in `launchers` and hostlists in `nodelist`), hold the roll call
(`rendezvous`), initialize JAX (`runtime`), prove the layout (`checks`).

Imports nothing but the standard library, JAX and NumPy (and hpcjax's own
`errors` and `contract`), so it works inside any JAX image. Never imports the
launch side.

    from hpcjax.rank import initialize
    denv = initialize()   # first thing in a training script
    for step in ...:
        progress(step)    # the hang watch: a job whose ranks stop calling this ends by itself
    step = compiled(jax.jit(train_step), state, batch)  # a restart loads it instead of compiling
    line_up("first step")  # every process here before the first collective (gloo allows 30 s)

Sub-rooms in the order they run on a rank: `start` (mapping, roll call, initialize), `prove` (checks
and the preflight), `watch` (hang watch, exit guard, stacks), `cache` (compiled programs kept
between runs).
"""

from hpcjax.rank.watch.hangwatch import hold, progress

__all__ = ["initialize", "progress", "hold", "compiled", "line_up"]


def __getattr__(name: str):
    if name == "initialize":  # imports JAX only when asked for
        from hpcjax.rank.start.runtime import initialize
        return initialize
    if name == "compiled":
        from hpcjax.rank.cache.executables import compiled
        return compiled
    if name == "line_up":
        from hpcjax.rank.start.barriers import line_up
        return line_up
    raise AttributeError(f"module 'hpcjax.rank' has no attribute {name!r}")

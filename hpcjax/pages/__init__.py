"""Pages and plots about runs, made after the fact from what a run wrote (its run directory,
hpcjax.protocol.rundir) or a check reported: `page` (`hpcjax report RUN_DIR`) and `bandwidth`
(`hpcjax smoke --plot`). Standard library and matplotlib (with its NumPy); never JAX.

`record` reads a run's directory back; `compare` puts several runs on one page.
"""

"""Containers: how every rank enters its container (`runtime`: the table; `runtimes/`: one
class per runtime; `binds`: what every runtime binds and passes) and the images themselves
(`recipes`: Apptainer definition files and Dockerfiles through hpccm; `requirements`: JAX's
own packages filtered out of a user's requirements).

The runtime side is standard library only (the rank side reads the table inside any JAX
image); `recipes` and `requirements` run where the recipe is written (hpccm, packaging).
"""

"""A rank's start-up, in the order it runs: read the environment (`launchers`, composed by
`mapping`), hold the roll call (`rendezvous`), initialize JAX (`runtime`); `plainjax` says what a
plain `jax.distributed.initialize()` would have resolved instead, `barriers` lines processes up."""

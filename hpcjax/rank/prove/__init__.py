"""Proof that a layout and its nodes work, before anyone trains on them: the checks of
`hpcjax check` (`checks`, with the pairwise bandwidth of `pairs`), and the preflight of a job's
nodes (`preflight`, reading the GPUs' health through `gpuhealth`)."""

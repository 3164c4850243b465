"""Following a job and saying how it ended, for every backend: the Run handle (`run`), the
failure analysis (`outcome`, `triage`, `hangs`, `ranklogs`), the grouping of ranks' stacks
(`stacks`; hpcjax.rank.watch.stacks is its node side) and the smoke test's verdicts (`verdicts`).

`interrupts` keeps a cancel that a Ctrl-C started from being stopped halfway by the next one. What
hpcjax says while it waits goes through hpcjax.values.voice, as every word to the user does.
"""

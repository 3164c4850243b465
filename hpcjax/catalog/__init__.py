"""What hpcjax remembers of the jobs it submitted, so a job is found again from its id in
any process: `records` (one JSON file per job under HPCJAX_HOME today). Standard library
only; the launch side writes it, every verb that finds a job reads it.

`keep` writes and updates what is kept of each job; `db` is the SQLite catalog of runs it fills.
"""

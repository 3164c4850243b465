"""What the login side and the rank side agree on, standard library only, so that both read one
owner: the layout's variables, log names and exit codes (`contract`, and `scriptnames`: all of them
as the batch script spells them), hpcjax's environment variables
(`envnames`), a run directory's files (`rundir`), a job's words for its states (`statuses`), the
time limits of every wait (`timeouts`), the preflight's floors (`preflight_rules`), where the ranks
run (`placement`), the ranks whose
stacks are the same (`stackgroups`) and which rank(s) held the others in a hang (`hangblame`)."""

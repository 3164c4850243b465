"""Values read and written the same way everywhere, standard library only: the user's mistake with
its hint (`errors`), checks of given values (`validate`), shell words (`shellword`), job ids and
keys (`jobid`), SLURM hostlists (`nodelist`), JSON lines (`jsonlines`), sizes (`sizes`); and the
one voice every message to the user goes through, on either side (`voice`: stderr, whole lines)."""

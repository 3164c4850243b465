"""The local backend's machinery: a job's ranks as processes of this machine (`processes`),
what each is given (`environment`), arrays one element after another (`queue`), and waiting
for --after (`chains`). The backend that uses them is hpcjax.backends.local."""

# How often the local backend looks at its ranks and at the jobs a job waits for (--after, an
# array's free slot): each look is a waitpid or a small file read, so a job of a second ends, and
# the next one starts, within 50 ms of its last rank rather than a fifth of a second.
TICK_S = 0.05

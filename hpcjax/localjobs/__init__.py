"""The local backend's machinery: a job's ranks as processes of this machine (`processes`),
what each is given (`environment`), arrays one element after another (`queue`), and waiting
for --after (`chains`). The backend that uses them is hpcjax.backends.local."""

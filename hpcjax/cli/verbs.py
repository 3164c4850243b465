"""The verbs of `hpcjax`: each one's module, the function there that adds it, and its line in
`hpcjax --help` (the one owner of that line: the module's parser takes it from here). `hpcjax
VERB` imports VERB's module only, and `hpcjax --help`, no verb or a misspelt one none of them:
on a login node whose Python sits on a shared filesystem every import is several metadata
round trips, and `status`, `logs` and `runs` run all day."""

# verb -> (module of hpcjax.cli, the function that adds it, or its module's verbs), in `hpcjax --help`'s order
VERBS = {
    "render": ("jobs", "add_render_verb"),
    "submit": ("jobs", "add_submit_verb"),
    "status": ("submitted", "add_status_verb"),
    "logs": ("submitted", "add_logs_verb"),
    "cancel": ("submitted", "add_cancel_verb"),
    "smoke": ("smoke", "add_smoke_verb"),
    "env": ("rank", "add_rank_verbs"),
    "preflight": ("rank", "add_rank_verbs"),
    "check": ("rank", "add_rank_verbs"),
    "train": ("train", "add_train_verb"),
    "profile": ("profile", "add_profile_verb"),
    "container": ("container", "add_container_verb"),
    "report": ("report", "add_report_verb"),
    "fetch": ("fetch", "add_fetch_verbs"),
    "tunnel": ("fetch", "add_fetch_verbs"),
    "stacks": ("stacks", "add_stacks_verb"),
    "runs": ("runs", "add_runs_verb"),
    "relaunch": ("runs", "add_relaunch_verb"),
    "nodes": ("nodes", "add_nodes_verb"),
    "hold": ("holds", "add_hold_verbs"),
    "holds": ("holds", "add_hold_verbs"),
    "release": ("holds", "add_hold_verbs"),
    "shell": ("nodeshell", "add_node_shell_verbs"),
    "jupyter": ("nodeshell", "add_node_shell_verbs"),
    "site": ("site", "add_site_verb"),
    "free": ("free", "add_free_verb"),
    "mcp": ("agents", "add_mcp_verb"),
}

HELP = {
    "render": "print the sbatch script for a job: render [options] -- CMD...",
    "submit": "submit a job: submit [options] -- CMD...",
    "status": "state of a job (finished jobs too)",
    "logs": "per-rank output of a job",
    "cancel": "cancel a job",
    "smoke": "submit one job that checks devices and all-reduce on every rank",
    "env": "what the runtime derives here, and why (initializes nothing)",
    "check": "run on every rank of a job step: prove the layout works",
    "preflight": ("run on every rank of a job step: measure the allocation's nodes and fail the "
                  "ones unfit to train on (what --preflight runs)"),
    "train": "train the example transformer (every rank runs this)",
    "profile": "site profiles: profile list | profile show NAME",
    "container": "container recipe | container build RECIPE -o IMAGE",
    "report": ("an HTML page with plots about a training run (report RUN_DIR), or comparing "
               "several (report RUN_A RUN_B ...)"),
    "fetch": "copy a job's logs and run directory (or a run directory) back from the cluster",
    "tunnel": "forward a port of a running job's first node to this machine (TensorBoard, a profiler, Jupyter)",
    "stacks": "the Python stacks of every rank of a running job, grouped (py-spy)",
    "runs": "the catalog of runs: every job hpcjax submitted (runs show ID: one run)",
    "relaunch": "submit a recorded run again: relaunch ID [options] [-- CMD...]",
    "nodes": "the nodes a preflight failed: when, what, which job (--preflight)",
    "hold": "hold a SLURM allocation that stays up; run jobs in it with --on NAME",
    "holds": "the held allocations: state, nodes, time left, the job running in each",
    "release": "end a held allocation (and the job running in it)",
    "shell": "a shell (or one command: -- CMD) on a held allocation's first node",
    "jupyter": "a Jupyter server on a held allocation's first node, tunnelled here",
    "site": ("learn a cluster in one command: its SLURM, partitions, GPUs, accounts and a "
             "node's runtimes, written as a site profile"),
    "free": "GPUs free now by partition and type, and when a layout would start",
    "mcp": ("serve hpcjax to an AI agent as MCP tools on stdin and stdout: submit, status, logs, stacks, "
            "cancel, free, runs, report"),
}

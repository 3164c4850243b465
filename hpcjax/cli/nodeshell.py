"""`hpcjax shell --on NAME` and `hpcjax jupyter --on NAME`: a shell, or a Jupyter server, on a held
allocation's first node, as a step beside whatever runs in it (`srun --overlap`), from this
machine or from a laptop through the one SSH connection (a Jupyter's port tunnelled to the laptop).
hpcjax never installs anything into the job's Python: with no Jupyter there, it says how to add one."""

from __future__ import annotations

import argparse
import contextlib
import queue
import re
import subprocess
import sys
import threading
import time

from hpcjax.cli import kinds
from hpcjax.cli.options import takes_command
from hpcjax.cli.reach import add_cluster_options, cluster_from_args
from hpcjax.cli.stopping import sigterm_as_ctrl_c
from hpcjax.values.errors import HpcjaxError, UsageError
from hpcjax.values.voice import relay, say
from hpcjax.cli.verbs import HELP

URL = re.compile(r"https?://[^\s/]+:(\d+)/\S*")  # what Jupyter prints: http://HOST:PORT/lab?token=...


def running_hold(args: argparse.Namespace):
    """The hold named by --on, up: (hold, cluster, first node)."""
    from hpcjax.values.nodelist import expand_hostlist
    from hpcjax.slurm import holds

    cluster = cluster_from_args(args)  # a --profile's host too
    hold = holds.find(args.on, cluster)
    status = holds.status(hold, cluster)
    if status is None or status.state != "RUNNING":
        raise HpcjaxError(f"hold {hold.name} (job {hold.job_id}) is {status.state if status else 'long over'}, "
                          "not running",
                          "`hpcjax holds` shows the holds; start one with `hpcjax hold --name NAME ...`")
    return hold, cluster, expand_hostlist(status.nodelist)[0]


def step_on_first_node(hold, cluster, node: str, *words: str) -> list[str]:
    """A step of the hold on its first node, beside the job running in it (it shares its resources)."""
    from hpcjax.slurm import commands
    from hpcjax.slurm.controller import slurm_on

    slurm = slurm_on(cluster.host())
    return commands.step_on_node(hold.job_id, node, list(words), overlap=slurm.has("srun", "--overlap"))


def run_there(cluster, argv: list[str], tty: bool = False) -> int:
    """argv on the host that reaches the cluster, this terminal's input and output its own."""
    if not cluster.remote:
        return subprocess.run(argv).returncode
    return subprocess.run(cluster.host().command(argv, tty=tty)).returncode


def cmd_shell(args: argparse.Namespace, command: list[str]) -> int:
    hold, cluster, node = running_hold(args)
    if command:
        return run_there(cluster, step_on_first_node(hold, cluster, node, *command))
    if not sys.stdin.isatty():
        raise UsageError("`hpcjax shell` without a command needs a terminal",
                         f"give the command to run there: hpcjax shell --on {args.on} -- hostname")
    say(f"shell on {node} in hold {hold.name} (job {hold.job_id}); exit to leave (the hold stays)")
    return run_there(cluster, step_on_first_node(hold, cluster, node, "--pty", "bash", "-l"), tty=True)


def cmd_jupyter(args: argparse.Namespace, command: list[str]) -> int:

    hold, cluster, node = running_hold(args)
    if args.local_port and not cluster.remote:
        raise UsageError(f"--local-port {args.local_port} is the tunnel's port on a laptop; hold {hold.name} is on "
                         "this machine's cluster, reached with no tunnel",
                         f"leave it out: the address printed is the node's own (port {args.port})")
    python = (cluster.python if cluster.remote else "") or sys.executable
    host = cluster.host()
    # JupyterLab where it is installed, else the plain Jupyter server it runs on (either serves notebooks).
    probe = host.run(step_on_first_node(hold, cluster, node, python, "-c", "import importlib.util as u, os; print(next(("
                                        "a for a in ('jupyterlab', 'jupyter_server') if u.find_spec(a)), ''), "
                                        "os.geteuid())"))
    said = probe.stdout.strip().splitlines()[-1].split() if probe.returncode == 0 and probe.stdout.strip() else []
    app, as_root = (said[0], said[-1] == "0") if len(said) == 2 else ("", False)
    if not app:
        say(f"no Jupyter in the job's Python ({python}) on {node}: hpcjax does not install into your "
            f"environment. Add one there with `{python} -m pip install jupyterlab` (or load the site's "
            "module in a prologue), then run `hpcjax jupyter` again")
        return 1
    # It is reached from another host (the login node, a laptop's tunnel) by the node's name: Jupyter answers
    # such a Host only with allow_remote_access (its token still guards it; on the dev cluster, where a
    # node's name is a loopback address, it answered 403 without). It refuses to run as root (a
    # container's user, CI's) without --allow-root: the user asked for it here.
    server = step_on_first_node(hold, cluster, node, python, "-m", app, "--no-browser", f"--ip={node}",
                                f"--port={args.port}", "--ServerApp.allow_remote_access=True",
                                *(["--allow-root"] if as_root else []))
    started = subprocess.Popen(host.command(ends_with_its_input(server)) if host.remote else server,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url, said = wait_for_url(started)
    if url is None:
        started.terminate()
        raise HpcjaxError(f"Jupyter on {node} printed no address" + (f"; its last lines:\n{said}" if said else ""),
                          f"run it by hand: hpcjax shell --on {args.on} -- {python} -m {app} --no-browser")
    # Jupyter takes the next port where the one asked for is taken on the node: the tunnel goes to the
    # one it took (it went to the one asked for, where nothing answered: a silent wait, issue 63)
    took = int(URL.search(url).group(1))
    if took != args.port:
        say(f"port {args.port} is taken on {node}: Jupyter listens on {took}")
    local = args.local_port or args.port
    try:
        with sigterm_as_ctrl_c(), host.forward(local, node, took) if host.remote else contextlib.nullcontext():
            if host.remote:  # the laptop's end of the tunnel, in the address Jupyter printed
                url = URL.sub(lambda m: m.group(0).replace(m.group(0).split("/")[2], f"127.0.0.1:{local}"), url)
            if not answers_soon(url, started):
                raise HpcjaxError(f"Jupyter on {node} printed {url} but does not answer there",
                                  f"its log is above; run it by hand: hpcjax shell --on {args.on} -- {python} -m "
                                  f"{app} --no-browser")
            print(url, flush=True)
            say(f"Jupyter on {node} in hold {hold.name}; Ctrl-C stops it (the hold stays)")
            started.wait()
    except KeyboardInterrupt:
        say("\nJupyter stopped; the hold keeps running")
    finally:
        if started.poll() is None:
            started.terminate()
            started.wait()
    return 0


# Over SSH without a terminal, the end of the local ssh (Ctrl-C, a kill, a dropped laptop) reaches nothing on
# the login node: srun, and the server with it, went on serving in the hold. The command's input is the
# connection, so its end is the signal: srun gets SIGTERM (it ends the step) when the input ends.
STOP_AT_END_OF_INPUT = ('exec 3<&0; "$@" <&- & step=$!; { cat <&3 >/dev/null 2>&1; kill -TERM "$step" 2>/dev/null; } '
                        '>/dev/null 2>&1 3<&3 & wait "$step"')


def ends_with_its_input(argv: list[str]) -> list[str]:
    """argv, stopped (SIGTERM) when its standard input ends: with the ssh that started it."""
    return ["bash", "-c", STOP_AT_END_OF_INPUT, "hpcjax-step", *argv]


def wait_for_url(process, timeout_s: float = 120.0) -> tuple[str | None, str]:
    """(the address the server printed, or None if it ended or said none in time; its last lines).
    Its output is read by a thread from the start to its end: lines after the address go to stderr
    (Jupyter's log, as in a terminal), so a long session never stalls the server on a full pipe."""
    lines: queue.Queue = queue.Queue()
    found_it = threading.Event()

    def pump() -> None:
        for line in process.stdout:
            if found_it.is_set():
                relay(line)
            else:
                lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    deadline, said = time.monotonic() + timeout_s, []
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return None, "".join(said[-10:])
        if line is None:
            return None, "".join(said[-10:])
        said.append(line)
        url = URL.search(line)
        if url:
            found_it.set()
            while not lines.empty():  # what came before the thread saw the flag: said, not lost
                rest = lines.get()
                if rest is not None:
                    relay(rest)
            return url.group(0), ""


def answers_soon(url: str, process, timeout_s: float = 60.0) -> bool:
    """Whether the server answers HTTP at its address (any status: 403 is an answer) before it ends or the
    time is up. jupyter_server 2 prints its address before it listens (it binds in its event loop's first
    turn): a browser or script sent there at once was refused. Through an SSH tunnel the local port
    always accepts, so only an HTTP answer counts, not a connection."""
    import http.client
    import ssl
    import urllib.error
    import urllib.request

    base = url.split("?")[0].rsplit("/", 1)[0] + "/api/status"
    unverified = ssl._create_unverified_context()  # its own certificate, if it has one: only "is it up" is asked
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(base, timeout=5, context=unverified if url.startswith("https") else None):
                return True
        except urllib.error.HTTPError:
            return True
        except (OSError, http.client.HTTPException):
            time.sleep(0.2)
    return False


def add_node_shell_verbs(sub) -> None:
    shell = sub.add_parser("shell", help=HELP["shell"])
    shell.add_argument("--on", required=True, metavar="HOLD", help="the hold (`hpcjax holds` lists them)")
    add_cluster_options(shell, profile_file=True)
    takes_command(shell, cmd_shell)
    shell.usage = shell.usage.replace("-- COMMAND [ARG ...]", "[-- COMMAND [ARG ...]]")  # none: an interactive shell

    jupyter = sub.add_parser("jupyter", help=HELP["jupyter"])
    jupyter.add_argument("--on", required=True, metavar="HOLD", help="the hold (`hpcjax holds` lists them)")
    jupyter.add_argument("--port", type=kinds.port, default=8888, help="its port on the node (default 8888)")
    jupyter.add_argument("--local-port", type=kinds.port,
                         help="from a laptop: the tunnel's port here (default: --port's; pass another when "
                              "a Jupyter of your own has it)")
    add_cluster_options(jupyter, profile_file=True)
    jupyter.set_defaults(run=cmd_jupyter, takes_command=False)

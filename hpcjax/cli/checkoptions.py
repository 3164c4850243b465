"""What `hpcjax site --check` is asked, read once: its options (an argparse group of `site`), the
refusals of a mix with site's own writing options, and, as one frozen value, the words each
check's job gets and what the page says of the container. The profile the jobs use is read here
once for the whole check; the checks themselves are hpcjax.cli.acceptance."""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from hpcjax.values.errors import UsageError

DEFAULT_NODES = 2


@dataclass(frozen=True)
class Asked:
    job_words: tuple[str, ...]  # every check's job: the user's cluster, profile and layout
    where_words: tuple[str, ...]  # what finds the cluster again (status, logs, stacks, cancel of a job)
    gpus_per_node: int
    image: str | None  # the option's, else the profile's
    runtime: str | None
    page: Path
    json: bool
    command_line: str  # as the user typed it, for the page


def add_check_options(site) -> None:
    check = site.add_argument_group("--check: the acceptance check (submits small jobs)")
    check.add_argument("--check", action="store_true", help="prove hpcjax works on this cluster: both smokes, the "
                                                            "container, a preflight, a script's exit, logs, stacks, "
                                                            "cancel; one HTML page says what to fix")
    check.add_argument("--profile", help="the profile its jobs use (e.g. the one `hpcjax site` wrote)")
    check.add_argument("--nodes", "-N", type=int, default=None, help=f"nodes (default: the profile's, else {DEFAULT_NODES})")
    check.add_argument("--gpus-per-node", type=int, help="GPUs per node (default: the profile's)")
    check.add_argument("--gpu-type", help="the GPUs' type (default: the profile's)")
    check.add_argument("--image", help="the image your jobs use")
    check.add_argument("--runtime", help="its runtime: apptainer, singularity, charliecloud, pyxis, none")
    check.add_argument("--time", "-t", default="00:10:00", help="each job's time limit (default 00:10:00)")
    check.add_argument("--page", default="hpcjax-check.html", help="where the page goes (default hpcjax-check.html)")


def asked(args) -> Asked | None:
    """The check's request (None without --check), or a UsageError: site's writing options with
    --check, the check's options without it, no GPUs per node, a runtime without an image."""
    if not args.check:
        for flag in ("profile", "gpus_per_node", "gpu_type", "image", "runtime", "nodes"):
            if getattr(args, flag) is not None:
                raise UsageError(f"--{flag.replace('_', '-')} is an option of the acceptance check",
                                 f"add --check to run it: hpcjax site --check --{flag.replace('_', '-')} ...")
        return None
    for flag, value in (("--name", args.name), ("--print", args.print), ("--no-node", args.no_node)):
        if value:
            raise UsageError(f"{flag} is for writing a profile; --check writes none",
                             "run `hpcjax site` first to write the profile, then `hpcjax site --check --profile NAME`")
    profile = _profile(args)
    nodes = args.nodes if args.nodes is not None else (None if profile.get("nodes") else DEFAULT_NODES)
    gpus_per_node = args.gpus_per_node or profile.get("gpus_per_node")
    if not gpus_per_node:
        raise UsageError("--check needs the GPUs of each node: --gpus-per-node G, or a profile with gpus_per_node",
                         "`hpcjax site` writes a profile with it where the partition's nodes agree; then "
                         "hpcjax site --check --profile NAME")
    runtime, image = args.runtime or profile.get("runtime"), args.image or profile.get("image")
    if runtime not in (None, "none") and not image:
        # (site writes the node's runtime into the profile, never an image: it cannot know yours)
        raise UsageError(f"the check's jobs run in {runtime}, and no image is given: every one of them would be "
                         "refused", "give the image your jobs use: --image IMAGE, or check bare with --runtime none")
    job_words = []
    for flag, value in (("--cluster", args.cluster), ("--profile-file", args.profile_file), ("--profile", args.profile),
                        ("--partition", args.partition), ("--nodes", nodes), ("--gpus-per-node", args.gpus_per_node),
                        ("--gpu-type", args.gpu_type), ("--image", args.image), ("--runtime", args.runtime),
                        ("--time", args.time)):
        if value is not None:
            job_words += [flag, str(value)]
    where_words = [word for flag, value in (("--cluster", args.cluster), ("--profile-file", args.profile_file))
                   if value is not None for word in (flag, value)]
    return Asked(job_words=tuple(job_words), where_words=tuple(where_words), gpus_per_node=int(gpus_per_node),
                 image=image, runtime=runtime, page=Path(args.page).expanduser(), json=bool(args.json),
                 command_line=shlex.join(sys.argv[1:]))


def _profile(args) -> dict:
    """The values of the profile the check's jobs use ({} without --profile)."""
    if not args.profile:
        return {}
    from hpcjax.job import profiles

    return profiles.resolve(args.profile, args.profile_file)[0]

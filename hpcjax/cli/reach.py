"""The options that name the cluster a verb reaches from a laptop (--cluster, --remote-dir,
--profile-file) and the Cluster they name. Apart from the job options (hpcjax.cli.options) so that
the verbs that only ask about a job (`status`, `logs`, `cancel`) start without importing them:
`hpcjax status` asks SLURM as early as it can (hpcjax.cli.submitted)."""

from __future__ import annotations

import argparse


def add_cluster_options(parser: argparse.ArgumentParser, *, profile_file: bool = False) -> None:
    """--cluster (and --remote-dir) for the verbs that reach a cluster from a laptop."""
    group = parser.add_argument_group("cluster reached over SSH (from a laptop)")
    group.add_argument("--cluster", metavar="DEST|PROFILE",
                       help="the cluster's login node: an SSH destination (user@login.example.org, or a Host "
                            "alias of ~/.ssh/config) or a profile that names one (host = ...); default: the "
                            "profile's host, else this machine")
    group.add_argument("--remote-dir", help="the directory on the cluster that holds what hpcjax ships "
                                            "(default $HOME/hpcjax; $VARIABLES are the cluster's)")
    if profile_file:
        group.add_argument("--profile-file", metavar="FILE", help="the profiles file (default: "
                           "$HPCJAX_PROFILES, else ~/.config/hpcjax/profiles.toml)")


def cluster_from_args(args: argparse.Namespace):
    """The Cluster the options name (hpcjax.launch.request.where: --cluster, a profile naming a host,
    or an SSH destination; else the profile's host, else $HPCJAX_CLUSTER, else this machine)."""
    from hpcjax.cli.options import request_from_args
    from hpcjax.launch.request import where

    return where(request_from_args(args, ()))

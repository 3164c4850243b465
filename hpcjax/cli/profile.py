"""`hpcjax profile list|show`: the site profiles a file holds, and one profile merged
with the profiles it extends, each value with the profile that set it."""

from __future__ import annotations

import argparse
import json
from hpcjax.values.voice import say
from hpcjax.cli.verbs import HELP


def cmd_profile(args: argparse.Namespace, command: list[str]) -> int:
    from hpcjax.values.errors import UsageError
    from hpcjax.job import profiles

    path, found = profiles.load(args.profile_file)
    if args.action == "list":
        if args.json:
            print(json.dumps({name: p.get("description", "") for name, p in found.items()}, indent=2))
            return 0
        say(f"profiles in {path}:")
        for name, profile in found.items():
            parent = f" (extends {profile['extends']})" if profile.get("extends") else ""
            print(f"{name}{parent}  {profile.get('description', '')}".rstrip())
        return 0
    if not args.name:
        raise UsageError("`hpcjax profile show` needs a profile name", f"profiles: {', '.join(found)}")
    values, sources = profiles.resolve(args.name, path)
    if args.json:
        print(json.dumps({"profile": args.name, "file": str(path), "values": values, "sources": sources}, indent=2))
        return 0
    say(f"profile {args.name} ({path}); command-line options win over these:")
    for key in profiles.OPTIONS:
        if key in values:
            print(f"{key:<16} {json.dumps(values[key])}   # from {sources[key]}")
    return 0


def add_profile_verb(sub) -> None:
    profile = sub.add_parser("profile", help=HELP["profile"])
    profile.add_argument("action", choices=("list", "show"), help="list the profiles, or show one merged")
    profile.add_argument("name", nargs="?", help="the profile to show (default: list them all)")
    profile.add_argument("--profile-file", metavar="FILE", help="default: $HPCJAX_PROFILES, else "
                         "~/.config/hpcjax/profiles.toml")
    profile.add_argument("--json", action="store_true", help="the profile(s) as JSON on stdout")
    profile.set_defaults(run=cmd_profile, takes_command=False)

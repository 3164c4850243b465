"""What a site enforces of its accounts and QOS, and what that means for one job, before sbatch.

SLURM reads associations (user, account, partition, QOS) and their limits only as far as the
controller's AccountingStorageEnforce says: on a strict site (associations, limits, qos) a job under
an account or QOS that is not the user's is refused, and one over its QOS's limit is held for ever;
on a lenient one (none, as SLURM ships) the same job runs, billed to the user's default account, its
QOS unknown, its limit not applied. So the same request is refused on one site and said on another:
never taken without a word (measured on the dev clusters: 22.05 lenient, 24.11 strict)."""

from __future__ import annotations

from hpcjax.slurm.commands import ASSOC_FIELDS
from hpcjax.slurm.controller import config_values
from hpcjax.slurm.fit import QosLimit
from hpcjax.slurm.site import read_rows
from hpcjax.values.errors import UsageError

ASSOC_HINT = "`sacctmgr show assoc user=$USER format=account,partition,qos` lists yours"


def judge(spec, answer, where: str, fits) -> list[str]:
    """The notes to say of a job whose --account or --qos SLURM on `where` would take; UsageError where
    it would refuse them or hold the job for ever. `answer(name)`: the check step's probe's (exit code,
    output) of config, associations and user; `fits()`: hpcjax.slurm.fit's check of the job."""
    rules = enforced(config_values(answer("config")[1]))
    user = answer("user")[1].strip()
    code, text = answer("associations")
    code_default, text_default = answer("default_accounts")
    default = next((row["DefaultAccount"] for row in user_rows(text_default if code_default == 0 else "", user,
                                                                 ("DefaultAccount",))), "")
    notes = check(spec, rules, user_rows(text if code == 0 else "", user, ASSOC_FIELDS), where, default)
    try:
        fits()
    except QosLimit as over:  # held for ever where limits are enforced, else run: said
        notes.append(limits_note(over, rules))
    return notes


def enforced(config: dict[str, str]) -> frozenset[str]:
    """AccountingStorageEnforce's words (`scontrol show config`), with what each implies: limits and
    qos need associations, safe needs limits. Empty for none, or when the value is not known."""
    words = {w.strip().lower() for w in config.get("AccountingStorageEnforce", "").split(",")} - {"", "none"}
    if "safe" in words:
        words.add("limits")
    if words & {"limits", "qos", "wckeys"}:
        words.add("associations")
    return frozenset(words)


def user_rows(text: str, user: str, fields: tuple[str, ...]) -> list[dict]:
    """sacctmgr -n -P rows (User first, then `fields`) of one user."""
    return [row for row in read_rows(text, ("User",) + fields) if row["User"] == user]


def check(spec, rules: frozenset[str], rows: list[dict], where: str, default_account: str = "") -> list[str]:
    """UsageError where SLURM on `where` would refuse the job's --account or --qos (rules enforced);
    the notes to say where it would take them and run the job otherwise than asked. `rows`: the user's
    associations (Account, QOS, ...); none read (no accounting), nothing is judged. A --qos without
    --account is judged under the account the job is billed to: the user's default, where known."""
    if not rows:
        return []
    notes = []
    accounts = sorted({row["Account"] for row in rows if row.get("Account")})
    if spec.account and spec.account not in accounts:
        said = f"--account {spec.account} is not one of yours on {where} ({', '.join(accounts)})"
        if "associations" in rules:
            raise UsageError(f"{said}: SLURM refuses such a job there (AccountingStorageEnforce="
                             f"{','.join(sorted(rules))})", f"give one of {', '.join(accounts)}; {ASSOC_HINT}")
        notes.append(f"{said}; SLURM there does not enforce accounts, and will run the job billed to your default "
                     "account instead")
    if spec.qos:
        account = spec.account or default_account
        mine = [row for row in rows if not account or row.get("Account") == account]
        allowed = sorted({q for row in mine for q in row.get("QOS", "").split(",") if q})
        if allowed and spec.qos not in allowed:
            under = (f" under account {spec.account}" if spec.account else
                     f" under your default account {account} (no --account given)" if account else "")
            said = f"--qos {spec.qos} is not one you may use{under} on {where} ({', '.join(allowed)})"
            having = sorted({row["Account"] for row in rows if spec.qos in row.get("QOS", "").split(",")})
            other = f", or --account {' or '.join(having)}, which has it" if having else ""
            if rules & {"qos", "limits"}:
                raise UsageError(f"{said}: SLURM refuses such a job there",
                                 f"give --qos {' or '.join(allowed)}{other}; {ASSOC_HINT}")
            notes.append(f"{said}; SLURM there does not enforce QOS, and will run the job without it")
    return notes


def limits_note(refusal: UsageError, rules: frozenset[str]) -> str:
    """A QOS limit the job is over (hpcjax.slurm.fit's refusal), on a site that does not apply it:
    said, not refused (SLURM runs the job)."""
    if "limits" in rules:
        raise refusal
    first = refusal.message.split(": SLURM would")[0]
    return f"{first}; SLURM there does not enforce QOS limits (AccountingStorageEnforce=none), and will run it"

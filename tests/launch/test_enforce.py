"""What a site enforces, read from `scontrol show config`, and what it means for a job's account and
QOS (hpcjax.slurm.enforce); the same requests on real strict and lenient clusters:
tests/releases/test_strict_site.py."""

import pytest

from hpcjax.job.spec import JobSpec, Layout
from hpcjax.slurm import enforce
from hpcjax.values.errors import UsageError

ROWS = [{"Account": "physics", "QOS": "gpu2,normal"}, {"Account": "root", "QOS": "normal"}]


def spec(**options):
    return JobSpec(command=("true",), layout=Layout(nodes=1, gpus_per_node=1), **options)


@pytest.mark.parametrize("value, words", [
    ("none", set()), ("", set()), ("associations,limits,qos", {"associations", "limits", "qos"}),
    ("limits", {"limits", "associations"}), ("safe", {"safe", "limits", "associations"}),
    ("qos", {"qos", "associations"}), ("Associations, Limits", {"associations", "limits"})])
def test_the_enforced_words_carry_what_they_imply(value, words):
    assert enforce.enforced({"AccountingStorageEnforce": value}) == words
    assert enforce.enforced({}) == frozenset()


def test_an_account_not_the_users_is_refused_where_enforced_and_said_where_not():
    with pytest.raises(UsageError, match=r"--account chem is not one of yours on c \(physics, root\): SLURM refuses"):
        enforce.check(spec(account="chem"), frozenset({"associations"}), ROWS, "c")
    notes = enforce.check(spec(account="chem"), frozenset(), ROWS, "c")
    assert notes == ["--account chem is not one of yours on c (physics, root); SLURM there does not enforce accounts, "
                     "and will run the job billed to your default account instead"]
    assert enforce.check(spec(account="physics", qos="gpu2"), frozenset({"associations", "qos"}), ROWS, "c") == []
    assert enforce.check(spec(account="chem"), frozenset({"associations"}), [], "c") == []  # nothing read: not judged


def test_a_qos_of_another_account_names_that_account():
    with pytest.raises(UsageError) as refused:
        enforce.check(spec(account="root", qos="gpu2"), frozenset({"qos", "associations"}), ROWS, "c")
    assert refused.value.hint.startswith("give --qos normal, or --account physics, which has it")
    notes = enforce.check(spec(qos="fast"), frozenset(), ROWS, "c")
    assert notes == ["--qos fast is not one you may use on c (gpu2, normal); SLURM there does not enforce QOS, and "
                     "will run the job without it"]


def test_rows_are_the_users_own():
    text = "alice|physics||gpu2,normal||||\nroot|root||normal||||\nroot|physics||normal||||\n"
    rows = enforce.user_rows(text, "root", ("Account", "Partition", "QOS", "DefaultQOS", "GrpTRES", "MaxTRES",
                                            "MaxWall"))
    assert [r["Account"] for r in rows] == ["root", "physics"]


def test_a_qos_without_an_account_is_judged_under_the_default_account():
    """Issue 63: --qos gpu2 alone ran without a word on the lenient dev cluster, billed to root,
    which has not gpu2 (only physics has it): judged under the account the job is billed to."""
    notes = enforce.check(spec(qos="gpu2"), frozenset(), ROWS, "c", default_account="root")
    assert notes == ["--qos gpu2 is not one you may use under your default account root (no --account given) on c "
                     "(normal); SLURM there does not enforce QOS, and will run the job without it"]
    with pytest.raises(UsageError) as refused:
        enforce.check(spec(qos="gpu2"), frozenset({"qos", "associations"}), ROWS, "c", default_account="root")
    assert refused.value.hint.startswith("give --qos normal, or --account physics, which has it")
    assert enforce.check(spec(qos="gpu2"), frozenset({"qos"}), ROWS, "c", default_account="physics") == []
    assert enforce.check(spec(qos="gpu2"), frozenset({"qos"}), ROWS, "c") == []  # default not known: any of theirs

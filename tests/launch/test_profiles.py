"""Site profiles: precedence (command line > profile > parent > defaults) for every kind
of option, the shipped Ibex example, every error, extra #SBATCH lines, prologue and
epilogue, and a site template that extends the packaged one."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, run_hpcjax
from hpcjax.values.errors import ConfigError, SpecError
from hpcjax.job.profiles import job_spec, resolve
from hpcjax.slurm.script import render_sbatch

EXAMPLES = REPO / "profiles" / "examples.toml"

FILE = """
[profiles.base]
partition = "gpu"
nodes = 2
exclusive = true
modules = ["dl"]
runtime = "apptainer"
image = "docker://nvcr.io/nvidia/jax:24.04-py3"
binds = ["/data"]
env = { A = "1", B = "2" }
sbatch = ["--licenses=scratch"]

[profiles.child]
extends = "base"
partition = "debug"
modules = { append = ["cuda"] }
binds = ["/scratch"]
env = { append = { B = "20", C = "3" } }

[profiles.fresh]
extends = "base"
env = { replace = { Z = "9" } }
"""


@pytest.fixture
def profile_file(tmp_path):
    path = tmp_path / "profiles.toml"
    path.write_text(FILE)
    return path


def test_a_profile_merges_over_its_parent_and_says_where_each_value_came_from(profile_file):
    values, sources = resolve("child", profile_file)
    assert values["partition"] == "debug" and sources["partition"] == "child"  # child over parent
    assert values["nodes"] == 2 and sources["nodes"] == "base"  # parent over defaults
    assert values["exclusive"] is True
    assert values["modules"] == ["dl", "cuda"] and sources["modules"] == "base + child"  # append
    assert values["binds"] == ["/scratch"] and sources["binds"] == "child"  # a plain list replaces
    assert values["env"] == {"A": "1", "B": "20", "C": "3"}  # append merges, the child's value wins
    assert resolve("fresh", profile_file)[0]["env"] == {"Z": "9"}  # replace


def test_the_command_line_wins_over_the_profile_and_lists_add_to_it(profile_file):
    spec = job_spec(["python", "t.py"], profile="child", profile_file=profile_file, partition="cli", nodes=1,
                    modules=["extra"], env={"A": "cli"}, gpus_per_node=4)
    assert (spec.partition, spec.layout.nodes, spec.layout.gpus_per_node) == ("cli", 1, 4)
    assert spec.modules == ("dl", "cuda", "extra")
    assert dict(spec.env) == {"A": "cli", "B": "20", "C": "3"}
    assert spec.exclusive is True and spec.sbatch_lines == ("--licenses=scratch",)
    assert job_spec(["x"]).layout.nodes == 1 and job_spec(["x"]).partition is None  # built-in defaults


def test_the_cli_applies_a_profile_with_the_same_precedence(tmp_path, profile_file):
    result = run_hpcjax("render", "--profile", "child", "--profile-file", str(profile_file), "--partition", "cli",
                        "--module", "extra", "--", "python", "t.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "#SBATCH --partition=cli\n" in text and "#SBATCH --nodes=2\n" in text and "#SBATCH --exclusive\n" in text
    assert "module load dl\nmodule load cuda\nmodule load extra\n" in text
    assert "#SBATCH --licenses=scratch\n" in text


def test_the_ibex_example_gives_seed_002s_g4n2p4_job(tmp_path):
    result = run_hpcjax("render", "--profile-file", str(EXAMPLES), "--profile", "ibex", "--nodes", "2",
                        "--gpus-per-node", "2", "--time", "00:05:00", "--", "python", "query_v1.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=2", "#SBATCH --gpus-per-node=2",
                 "#SBATCH --time=00:05:00", "#SBATCH --cpus-per-task=4", "#SBATCH --constraint=a100",
                 "module load dl", "module load jax/23.10-sif", 'scontrol show job "$SLURM_JOB_ID"'):
        assert line + "\n" in text, line
    assert 'singularity exec --nv --bind "$HPCJAX_LOG_DIR" --bind ' in text and ' "${JAX_IMAGE:?' in text and "--ntasks=4" in text
    assert text.index("scontrol show job") < text.index("srun --kill-on-bad-exit")
    assert shellcheck(text) == ""


def test_the_pyxis_example_puts_the_image_on_the_srun_line(tmp_path):
    """Rendered and shellchecked only: pyxis is not on these machines."""
    result = run_hpcjax("render", "--profile-file", str(EXAMPLES), "--profile", "pyxis", "--nodes", "2",
                        "--gpus-per-node", "4", "--", "python", "train.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    srun = text[text.index("srun --kill"):text.index("python train.py")]
    assert "--container-image='nvcr.io#nvidia/jax:24.04-py3'" in srun and "--container-mounts=" in srun
    assert ",/shared:/shared," in srun
    assert "singularity" not in srun and "apptainer" not in srun
    assert shellcheck(text) == ""


def shellcheck(text: str) -> str:
    if shutil.which("shellcheck") is None:
        pytest.fail("shellcheck is not installed; the test command installs it")
    return subprocess.run(["shellcheck", "-"], input=text, capture_output=True, text=True).stdout


def test_profile_list_and_show(tmp_path, profile_file):
    listed = run_hpcjax("profile", "list", "--profile-file", str(profile_file), cwd=tmp_path)
    assert listed.stdout.splitlines() == ["base", "child (extends base)", "fresh (extends base)"]
    shown = run_hpcjax("profile", "show", "child", "--profile-file", str(profile_file), cwd=tmp_path).stdout
    assert 'modules          ["dl", "cuda"]   # from base + child' in shown
    assert 'partition        "debug"   # from child' in shown


@pytest.mark.parametrize("text, words", [
    ('[profiles.a]\npartiton = "gpu"\n', "profile 'a': unknown key 'partiton'"),
    ("[profiles.a]\nnodes = \"two\"\n", "profile 'a': nodes must be an integer, got 'two'"),
    ("[profiles.a]\nexclusive = 1\n", "exclusive must be true or false"),
    ("[profiles.a]\nmodules = \"dl\"\n", "modules must be a list of strings"),
    ('[profiles.a]\nextends = "b"\n[profiles.b]\nextends = "a"\n', "cycle: a -> b -> a"),
    ('[profiles.a]\nextends = "zz"\n', "extends unknown profile 'zz'"),
    ("[profiles.a]\nnodes = = 2\n", "is not valid TOML"),
    ('partition = "gpu"\n', "expected only [profiles.NAME] tables"),
])
def test_every_error_in_a_profile_file_names_the_file_the_profile_and_the_key(tmp_path, text, words):
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        resolve("a", path)
    assert words in err.value.message and str(path) in err.value.message and err.value.hint


def test_malformed_toml_shows_the_line(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('[profiles.a]\npartition = "gpu"\nnodes = = 2\n')
    with pytest.raises(ConfigError, match=r"line 3"):
        resolve("a", path)


def test_an_unknown_profile_lists_the_ones_there(tmp_path, profile_file):
    result = run_hpcjax("submit", "--profile", "nope", "--profile-file", str(profile_file), "--", "true",
                        cwd=tmp_path)
    assert result.returncode == 2 and "unknown profile 'nope'" in result.stderr
    assert "profiles there: base, child, fresh" in result.stderr
    assert not (tmp_path / "hpcjax-logs").exists()


@pytest.mark.parametrize("line, words", [
    ("--time=5", "sets --time, which hpcjax already sets"), ("-N 3", "sets -N,"), ("--gres=gpu:2", "--gres"),
    ("--licenses=a\nb", "newline"), ("licenses=a", "is not one sbatch option"), ("", "non-empty"),
    ("--output=/tmp/x", "use --output-dir instead"),
])
def test_extra_sbatch_lines_that_hpcjax_sets_or_that_are_not_one_option_are_refused(line, words):
    with pytest.raises(SpecError) as err:
        job_spec(["x"], sbatch=[line])
    assert words in err.value.message + err.value.hint


def test_extra_lines_render_shellcheck_clean_and_never_run_as_code(tmp_path):
    spec = job_spec(["python", "t.py"], sbatch=["--comment=$(touch${IFS}pwned)", "--reservation=big", "-L scratch"],
                    prologue=["echo before"], epilogue=['echo "after: $hpcjax_rc"'])
    text = render_sbatch(spec)
    assert "#SBATCH --comment=$(touch${IFS}pwned)\n#SBATCH --reservation=big\n#SBATCH -L scratch\n" in text
    assert text.index("echo before") < text.index("srun --kill") < text.index('echo "after')
    assert shellcheck(text) == ""


def test_a_prologue_that_is_not_bash_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(SpecError, match="not valid bash"):
        render_sbatch(job_spec(["x"], prologue=["if then fi ("]))


def test_a_site_template_extends_the_packaged_one(tmp_path):
    site = tmp_path / "site.sh.j2"
    site.write_text('{% extends "hpcjax/sbatch.sh.j2" %}\n{% block prologue %}\necho "site prologue"\n'
                    "{{ super() }}{% endblock %}\n")
    text = render_sbatch(job_spec(["python", "t.py"], template=str(site), prologue=["echo mine"]))
    assert text.index('echo "site prologue"') < text.index("echo mine") < text.index("srun --kill")
    assert shellcheck(text) == ""
    broken = tmp_path / "broken.sh.j2"
    broken.write_text('{% extends "hpcjax/sbatch.sh.j2" %}\n{% block epilogue %}\nfi\n{% endblock %}\n')
    with pytest.raises(SpecError, match="not valid bash"):
        render_sbatch(job_spec(["x"], template=str(broken)))
    with pytest.raises(SpecError, match="does not exist"):
        job_spec(["x"], template=str(tmp_path / "missing.j2"))


def test_profile_templates_are_found_beside_the_profile_file(tmp_path):
    (tmp_path / "site.sh.j2").write_text('{% extends "hpcjax/sbatch.sh.j2" %}\n')
    (tmp_path / "p.toml").write_text('[profiles.s]\ntemplate = "site.sh.j2"\n')
    assert job_spec(["x"], profile="s", profile_file=tmp_path / "p.toml").template == str(tmp_path / "site.sh.j2")


def test_the_profile_file_comes_from_the_environment(tmp_path, profile_file):
    result = subprocess.run([sys.executable, "-m", "hpcjax", "profile", "list"], capture_output=True, text=True,
                            env={**__import__("os").environ, "HPCJAX_PROFILES": str(profile_file)})
    assert result.stdout.splitlines()[0] == "base"
    missing = run_hpcjax("profile", "list", env={"HPCJAX_PROFILES": str(Path(profile_file).parent / "no.toml")})
    assert missing.returncode != 0 and "no profile file at" in missing.stderr


@pytest.mark.cluster
def test_the_ibex_profile_runs_the_checks_on_the_dev_cluster(tmp_path, slurm_cluster, hpcjax_home):
    """Stand-ins, not Singularity: `module` is a bash function (BASH_ENV) whose
    `module load jax/23.10-sif` sets JAX_IMAGE, and `singularity` is a script on the PATH
    that checks the image exists and runs the command bare. The dev cluster's nodes carry
    the a100 feature the profile asks for."""
    image = tmp_path / "jax-23.10.sif"
    image.write_text("stand-in image\n")
    (tmp_path / "bin").mkdir()
    stub = tmp_path / "bin" / "singularity"
    stub.write_text('#!/bin/bash\n[ "$1" = exec ] || exit 64\nshift\nwhile [[ $1 == -* ]]; do\n'
                    '  case $1 in --bind|-B) shift 2 ;; *) shift ;; esac\ndone\n'
                    '[ -f "$1" ] || { echo "stand-in singularity: no image $1" >&2; exit 65; }\nshift\nexec "$@"\n')
    stub.chmod(0o755)
    modules = tmp_path / "module.sh"
    modules.write_text(f'module() {{ echo "module $*" >&2; if [ "$2" = jax/23.10-sif ]; then '
                       f'export JAX_IMAGE={image}; fi; }}\n')
    env = {"BASH_ENV": str(modules), "PATH": f"{tmp_path / 'bin'}:{__import__('os').environ['PATH']}"}
    result = run_hpcjax("submit", "--profile-file", str(EXAMPLES), "--profile", "ibex", "--nodes", "2",
                        "--gpus-per-node", "2", "--time", "00:05:00", "--wait", "--", sys.executable, "-m", "hpcjax",
                        "check", "all", "--json", cwd=tmp_path, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    job = result.stdout.strip()
    batch = (tmp_path / "hpcjax-logs" / f"{job}-batch.log").read_text()
    assert "module load dl" in batch and "module load jax/23.10-sif" in batch
    assert f"JobId={job}" in batch  # the profile's prologue: scontrol show job
    logs = run_hpcjax("logs", job, cwd=tmp_path).stdout
    assert logs.count('"check": "allreduce"') == 4 and '"ok": false' not in logs


def test_the_profiles_file_is_read_once_per_process_until_it_changes(tmp_path, monkeypatch):
    """A submission with --cluster PROFILE read the file three times (its profile, its cluster, the
    spec's defaults: issue 64); now once, and again only when the file changed."""
    from hpcjax.job import clusters, profiles

    path = tmp_path / "profiles.toml"
    path.write_text(FILE + '\n[profiles.far]\nhost = "me@login.example.org"\n')
    reads = []
    real = profiles._read
    monkeypatch.setattr(profiles, "_read", lambda p: reads.append(p) or real(p))
    values, _ = resolve("child", path)
    values["modules"].append("mutated by a caller")
    assert clusters.cluster_named("far", values, path).destination == "me@login.example.org"
    assert job_spec(["true"], profile="child", profile_file=path).modules == ("dl", "cuda")
    assert len(reads) == 1
    path.write_text(FILE.replace('partition = "debug"', 'partition = "short"'))
    assert resolve("child", path)[0]["partition"] == "short"
    assert len(reads) == 2

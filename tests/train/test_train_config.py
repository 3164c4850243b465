"""TrainConfig and ModelConfig refuse bad values on construction, without JAX, with
the same error style as JobSpec; the mesh checks come once the devices are known."""

import subprocess
import sys

import pytest

from hpcjax.values.errors import ConfigError, UsageError
from hpcjax.train.config import ModelConfig, TrainConfig

BAD = [
    (dict(strategy="zero3"), "unknown strategy 'zero3'", "dp, fsdp, tp, fsdp_tp, hsdp"),
    (dict(steps=0), "steps must be an integer >= 1, got 0", "--steps"),
    (dict(batch_size=-4), "batch_size must be an integer >= 1", "--batch-size"),
    (dict(accum_steps=0), "accum_steps must be an integer >= 1", "--accum-steps"),
    (dict(checkpoint_every=-1), "checkpoint_every must be an integer >= 0", "--checkpoint-every"),
    (dict(learning_rate=0.0), "learning_rate must be a number > 0", "--learning-rate"),
    (dict(learning_rate=float("nan")), "learning_rate must be a number > 0", "--learning-rate"),
    (dict(peak_tflops=-1.0), "peak_tflops must be a number > 0", "--peak-tflops"),
    (dict(min_lr_ratio=1.5), "min_lr_ratio must be a number >= 0 and <= 1", "--min-lr-ratio"),
    (dict(batch_size=30, accum_steps=4), "batch_size=30 is not a multiple of accum_steps=4", "--accum-steps"),
    (dict(tensor_size=2, strategy="dp"), "tensor_size=2 was given with strategy 'dp'", "fsdp_tp"),
    (dict(stop_after=0), "stop_after must be an integer >= 1", "--stop-after"),
    (dict(steps=True), "steps must be an integer >= 1, got True", "--steps"),
    (dict(run_dir=""), "run_dir must be a non-empty path", "--run-dir"),
    (dict(model="big"), "model must be a ModelConfig", "ModelConfig"),
    (dict(steps=10, profile_steps="3:10"), "profile_steps 3:10 reaches past the last step (9)", "--steps 10"),
    (dict(profile_steps="5:3"), "malformed profile_steps '5:3'", "--profile-steps 3:5"),
    (dict(profile_steps="3-5"), "malformed profile_steps '3-5'", "A <= B"),
    (dict(profile_server=70000), "profile_server=70000 is not a TCP port", "1..65535"),
    (dict(profile_server=0), "profile_server must be an integer >= 1", "--profile-server"),
    (dict(compile_cache=""), "compile_cache must be auto, off or a directory", "--compile-cache"),
    # found by the seam matrix: a pytest directory named test_seam[train-slurm-requeue] held checkpoints
    # Orbax wrote but could not restore (its glob reads the brackets), so a requeued run failed
    (dict(run_dir="/shared/exp[3]/run"), "has a [...] in its path: Orbax saves checkpoints there but cannot "
                                         "restore them", "--checkpoint-every 0"),
]


@pytest.mark.parametrize("fields, message, hint", BAD, ids=[m for _, m, _ in BAD])
def test_bad_values_are_refused_with_the_value_and_a_hint(fields, message, hint):
    with pytest.raises(ConfigError) as err:
        TrainConfig(**fields)
    assert message in err.value.message and hint in err.value.hint
    assert isinstance(err.value, UsageError)  # the CLI exits 2 for it


@pytest.mark.parametrize("fields, message", [(dict(heads=0), "heads must be an integer >= 1"),
                                             (dict(d_model=100, heads=8), "d_model=100 is not a multiple of heads=8"),
                                             (dict(seq_len=-1), "seq_len must be an integer >= 1")])
def test_bad_model_shapes_are_refused(fields, message):
    with pytest.raises(ConfigError, match=message):
        ModelConfig(**fields)


def test_mesh_checks_name_the_mesh():
    cfg = TrainConfig(batch_size=12)
    with pytest.raises(ConfigError) as err:
        cfg.check_mesh(8, 1)
    assert "must split evenly over the 8 devices" in err.value.message and "8 (data) x 1 (tensor)" in err.value.hint
    TrainConfig(batch_size=16).check_mesh(8, 1)  # fine


def test_validating_a_config_does_not_import_jax():
    code = ("import sys; from hpcjax.train import TrainConfig; TrainConfig(strategy='tp', steps=3); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'optax', 'orbax')))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "[]"


def test_a_corpus_without_python_source_names_options_that_exist(tmp_path):
    from hpcjax.cli.train import add_train_verb
    from hpcjax.train.data import load_corpus
    import argparse

    with pytest.raises(UsageError) as err:
        load_corpus(1 << 20, str(tmp_path))
    options = {a for action in _train_parser(add_train_verb, argparse)._actions for a in action.option_strings}
    named = {word.strip("(),.") for word in err.value.hint.split() if word.startswith("--")}
    assert named and named <= options, (named, err.value.hint)


def _train_parser(add_train_verb, argparse):
    parser = argparse.ArgumentParser()
    add_train_verb(parser.add_subparsers())
    return parser._subparsers._group_actions[0].choices["train"]

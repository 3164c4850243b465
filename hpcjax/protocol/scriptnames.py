"""The contract as the batch script spells it: every name of hpcjax.protocol.contract the
template needs, read in one place, with the job's name as the script knows it (a job, an array's
element, a job in a hold). slurm.script adds the spec's own values."""

from __future__ import annotations

from hpcjax.protocol import contract


def script_names(output_dir: str, *, array: bool, in_hold: bool, hold: bool, retry_failed: bool, preflight: bool,
                 gpus_per_process: int) -> dict[str, object]:
    """Every name of the contract the batch script spells, in one reading (the template's values:
    slurm.script adds the spec's own): the logs, markers, signals, exit codes and keys, with the
    job's name as the script knows it."""
    key = contract.job_key_shell(array, in_hold=in_hold)
    batch_log, rank_log = contract.batch_log_pattern(output_dir, array), contract.rank_log_pattern(output_dir, array)
    return dict(
        batch_log=batch_log, rank_log=rank_log,
        preflight_log=batch_log.replace(contract.BATCH_LOG.replace("%j", ""),
                                        contract.PREFLIGHT_LOG.replace("%j", "")),
        hold_spool=contract.HOLD_QUEUE.replace("%j", "${SLURM_JOB_ID}") if hold else "",
        job_key_env=contract.JOB_KEY_ENV,
        compile_cache_env=contract.COMPILE_CACHE_ENV, warning_signal=contract.WARNING_SIGNAL,
        stop_marker=contract.STOP_MARKER.replace("%j", key), stop_marker_env=contract.STOP_MARKER_ENV,
        attempts_log=contract.ATTEMPTS_LOG.replace("%j", key), attempt_line=contract.ATTEMPT_LINE,
        batch_log_name=contract.BATCH_LOG.replace("%j", key),
        rank_log_name=contract.RANK_LOG.replace("%j", key).replace("%t", "${hpcjax_failed_task}"),
        no_retry_exit=contract.NO_RETRY_EXIT,
        jax_local_device_ids=contract.jax_local_device_ids(gpus_per_process),
        log_dir_env=contract.LOG_DIR_ENV, hang_marker=contract.HANG_MARKER.replace("%j", key),
        hang_nodes=contract.HANG_NODES.replace("%j", key), stuck_exit=contract.STUCK_EXIT_CODE,
        rank_hang_prefix=contract.RANK_HANG.split("%t")[0].replace("%j", key),
        rank_hang_suffix=contract.RANK_HANG.split("%t")[1],
        attempt_number=contract.attempt_number_shell(),
        attempt_printf=contract.attempt_printf(retry_failed, preflight),
        error_key=contract.ERROR_KEY, failed_node_key=contract.FAILED_NODE_KEY,
        preflight_log_name=contract.PREFLIGHT_LOG.replace("%j", key),
        preflight_verdict=contract.PREFLIGHT_VERDICT.replace("%j", key),
        preflight_key=contract.PREFLIGHT_KEY)

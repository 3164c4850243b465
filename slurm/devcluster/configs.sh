#!/usr/bin/env bash
# Write slurm.conf, gres.conf and slurmdbd.conf into $1 from NODES GPUS CPUS HOST DIR PORT_BASE, and
# for a release other than 22.05 (up.sh --release) CLUSTER, RELEASE (24.11, ...), DB_PORT (the one
# MariaDB, the 22.05 cluster's), STRICT (1: the strict site, below) and SHARED (the checkout and
# Python its root shares).
# Beside the NODES of the default partition "gpu" (untyped gpu:GPUS), one more node, "the typed node",
# is the partition "a100" alone: 2 GPUs typed a100 and a time limit of an hour, as a site's second
# partition would be (--gpu-type, a partition's limits and `hpcjax site`'s reading of them run for real).
set -euo pipefail
out=$1
CLUSTER=${CLUSTER:-hpcjaxdev}
RELEASE=${RELEASE:-22.05}
DB_PORT=${DB_PORT:-$((PORT_BASE + 3))}
STRICT=${STRICT:-}
database=slurm_acct_db
[[ $CLUSTER == hpcjaxdev ]] || database=slurm_acct_db_$CLUSTER  # one database per cluster
last_port=$((PORT_BASE + 100 + NODES - 1))
typed=node$((NODES + 1))
cat >"$out/slurm.conf" <<CONF
# Written by hpcjax slurm/devcluster/up.sh; regenerated on every start.${SHARED:+
# The daemons run in a root that shares these paths (enter.sh): another checkout restarts them.
# $SHARED}
ClusterName=$CLUSTER
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$PORT_BASE
SlurmdPort=$((PORT_BASE + 1))
AuthType=auth/munge
# cred_expire also holds a requeued job back this long before it may start again
# (SLURM's default 120 s); shorter here so the requeue tests do not idle.
AuthInfo=socket=$DIR/munge/munge.socket,cred_expire=20
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/slurmd.%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.%n.log
# No cgroups on these machines: track processes by parent, bind no tasks.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
# Backfill every 5 s (SLURM's default is 30): a job that may start beside a whole-cluster job
# waiting for GPUs starts within seconds, not half a minute (the seam matrix's hang cells hold
# GPUs for five minutes, and the other tests' jobs run beside them by backfill).
# The main scheduling loop every 2 s (default 60): a requeued job becomes eligible cred_expire + 1 s
# after its requeue, and nothing wakes the scheduler then (backfill runs only after a change of
# the queue or the nodes), so requeued jobs waited up to a minute more for the loop (up to 31 s
# in CI 17, ~130 s of the suite's test time over its 15 requeues).
SchedulerParameters=bf_interval=5,sched_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
# Nodes may declare more CPUs than this machine has.
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$((PORT_BASE + 2))
# The munge socket for connections to slurmdbd (AuthInfo covers the rest).
AccountingStoragePass=$DIR/munge/munge.socket
AccountingStorageTRES=gres/gpu
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=300
KillWait=30
InactiveLimit=0
NodeName=node[1-$NODES] NodeHostname=$HOST NodeAddr=127.0.0.1 Port=[$((PORT_BASE + 100))-$last_port] CPUs=$CPUS RealMemory=16000 Gres=gpu:$GPUS Features=a100 State=UNKNOWN
NodeName=$typed NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$((last_port + 1)) CPUs=4 RealMemory=8000 Gres=gpu:a100:2 State=UNKNOWN
PartitionName=gpu Nodes=node[1-$NODES] Default=YES MaxTime=INFINITE State=UP
PartitionName=a100 Nodes=$typed MaxTime=01:00:00 State=UP
CONF
{
  echo "# Written by hpcjax slurm/devcluster/up.sh: GPUs emulated by character devices."
  echo "AutoDetect=off"
  for node in $(seq 1 "$NODES"); do
    echo "NodeName=node$node Name=gpu File=$DIR/dev/node$node/nvidia[0-$((GPUS - 1))]"
  done
  echo "NodeName=$typed Name=gpu Type=a100 File=$DIR/dev/$typed/nvidia[0-1]"
} >"$out/gres.conf"
cat >"$out/slurmdbd.conf" <<CONF
# Written by hpcjax slurm/devcluster/up.sh.
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.socket
DbdHost=localhost
DbdPort=$((PORT_BASE + 2))
SlurmUser=root
LogFile=$DIR/log/slurmdbd.log
PidFile=$DIR/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurmdev
StorageLoc=$database
CONF
# slurmd from 23.02 on refuses to start without a cgroup plugin ("Unable to initialize cgroup
# plugin"), even with proctrack/linuxproc and task/none, unless cgroup.conf disables it.
if [[ ${RELEASE%%.*} -ge 23 ]]; then
  echo "CgroupPlugin=disabled" >"$out/cgroup.conf"
fi
# The strict site: SLURM itself refuses a job without a valid association (account, user, partition)
# or over its QOS, and a submit filter refuses a job without --time or --account and gives one without --qos the
# site's default (job_submit.lua beside slurm.conf). up.sh adds the accounts and QOS it expects.
if [[ -n $STRICT ]]; then
  cat >>"$out/slurm.conf" <<CONF
AccountingStorageEnforce=associations,limits,qos
JobSubmitPlugins=lua
CONF
  cat >"$out/job_submit.lua" <<'LUA'
-- Written by hpcjax slurm/devcluster/up.sh: the strict site's submit filter.
function slurm_job_submit(job_desc, part_list, submit_uid)
  if job_desc.time_limit == nil or job_desc.time_limit == slurm.NO_VAL or job_desc.time_limit == 4294967294 then
    slurm.log_user("this site needs a time limit on every job: give --time (for example --time 01:00:00)")
    return slurm.ERROR
  end
  if job_desc.account == nil or job_desc.account == "" then
    slurm.log_user("this site needs an account on every job: give --account (yours: sacctmgr show assoc user=$USER)")
    return slurm.ERROR
  end
  if job_desc.qos == nil or job_desc.qos == "" then
    job_desc.qos = "normal"
  end
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end

return slurm.SUCCESS
LUA
fi

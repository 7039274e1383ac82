#!/bin/bash
# One task of deploy/slurm/job.sbatch: sets this task's role, endpoint and trainer id from its
# rank and the endpoint lists the job exported, then runs the command it is given.
# Tasks 0..P-1 are the pservers of PADDLE_INIT_PSERVERS, the others the trainers of
# PADDLE_TRAINER_ENDPOINTS in order.
set -euo pipefail
IFS=, read -ra ps <<<"$PADDLE_INIT_PSERVERS"
IFS=, read -ra tr <<<"$PADDLE_TRAINER_ENDPOINTS"
if ((SLURM_PROCID < ${#ps[@]})); then
  export TRAINING_ROLE=PSERVER
  ep=${ps[SLURM_PROCID]}
else
  export TRAINING_ROLE=TRAINER PADDLE_TRAINER_ID=$((SLURM_PROCID - ${#ps[@]}))
  ep=${tr[PADDLE_TRAINER_ID]}
fi
export POD_IP=${ep%:*} PADDLE_INIT_PORT=${ep##*:}
if [ "$POD_IP" != 127.0.0.1 ] && [ "$POD_IP" != "$SLURMD_NODENAME" ]; then
  echo "task.sh: task $SLURM_PROCID runs on $SLURMD_NODENAME, but its endpoint is $ep: give every" \
       "node the same number of tasks (sbatch --ntasks-per-node)" >&2
  exit 2
fi
exec "$@"

"""What exactly is executed for a task: its argument vector and its environment.

The script is executed directly (its ``#!`` line picks the interpreter), never through a
shell, so nothing from a ``#METAQ`` directive or a file name is ever parsed as shell code.

The environment is the runner's own (so the batch job's ``SLURM_*``/``PBS_*`` variables and
loaded modules carry over, as in METAQ) plus:

``METAQ_TASK``
    the task's id relative to the queue;
``METAQ_SCRIPT``
    where the task file sits while it runs (``working/...``). The script's own ``$0`` is
    ``/proc/self/fd/3``: what starts is the content the runner checked, held in memory
    (:mod:`metaq_py.launch.checked`), never the file at that path read again;
``METAQ_ATTEMPT``, ``METAQ_RESUME``
    which start this is (from 1) and ``1`` when the task should resume from a checkpoint;
``METAQ_NODELIST``, ``METAQ_NNODES``, ``METAQ_HOSTFILE``
    its hosts, comma-separated, their number, and a file naming them one per line (for
    ``srun --nodelist=$METAQ_NODELIST -N $METAQ_NNODES`` or ``mpirun -hostfile``);
``CUDA_VISIBLE_DEVICES`` (or ``ROCR_VISIBLE_DEVICES``, ``ZE_AFFINITY_MASK``)
    its GPU ids on each node, when the runner assigns GPUs: ``ROCR_VISIBLE_DEVICES`` on AMD
    nodes and ``ZE_AFFINITY_MASK`` on Intel nodes (where the batch job set that variable, as
    SLURM does on AMD nodes), else ``CUDA_VISIBLE_DEVICES``; only one of them, since HIP
    reads both of AMD's and would apply the ids twice;
``METAQ_CPUS``, ``METAQ_NCPUS``, ``METAQ_CPU_MASK``
    a share of a node's core ids (comma-separated, numbered ``0 ..`` on its node), their
    number (``HQ_CPUS`` in HyperQueue's words) and their mask for a script's own ``srun
    --cpu-bind=mask_cpu:$METAQ_CPU_MASK``; unset for whole-node tasks;
``METAQ_MPIRUN``
    a ready launch prefix for the task's nodes, ranks per node and cores, for the site's MPI
    launcher (``$METAQ_MPIRUN ./prop``; :mod:`metaq_py.launch.binding`), when there is one;
``METAQ_CHECKPOINT_FILE``, ``METAQ_RESIZE_FILE``
    the file to touch after a checkpoint and the file the runner writes a new node list to
    before a resize signal;
``METAQ_LOG``
    the task's own log file.

Inside a SLURM job the node and task counts srun reads are adjusted to the task (see
:mod:`metaq_py.launch.slurm_step`).

In ``srun_wrap`` mode the command is ``srun --nodelist=FIRST --nodes=1 --ntasks=1 --exact
--overlap --job-name=TASK [srun_args] PYTHON -m metaq_py.launch STEP_FILE SCRIPT``:

- one copy of the script needs a one-task step, and a one-task step cannot span several nodes
  (srun cuts ``--nodes`` down to the task count), so the script runs on the first of its
  nodes and reaches the others with its own ``srun --nodelist=$METAQ_NODELIST``;
- ``--exact`` keeps the wrapper step to one CPU, and ``--overlap`` lets the script's own steps
  use the CPUs it holds (without it they wait for them forever);
- a share of a node adds ``--cpus-per-task=N --cpu-bind=mask_cpu:MASK`` (its cores), and the
  wrapper binds the script to them itself where SLURM does not bind
  (:mod:`metaq_py.launch.binding`);
- the runner's Python records the step's id, re-applies the node-count fix inside the step
  and then becomes the script (``execve``); it must exist at the same path on the compute
  nodes, as it normally does on a shared file system;
- graceful signals go through ``scancel`` (see :mod:`metaq_py.launch.slurm_step`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from metaq_py.launch.binding import cpu_mask, srun_binding
from metaq_py.launch.spec import LaunchSpec

__all__ = ["gpu_variable", "task_command", "task_environment", "wrapper_command"]


def task_command(spec: LaunchSpec, *, srun: str = "srun") -> list[str]:
    """The argument vector that starts ``spec``'s script, directly or under ``srun``."""
    if not spec.srun_wrap:
        return [os.path.abspath(spec.script)]
    return [
        srun,
        f"--nodelist={spec.nodes[0]}",
        "--nodes=1",
        "--ntasks=1",
        "--exact",
        "--overlap",
        f"--job-name={spec.task}",
        *(srun_binding(spec.cores) if spec.cores is not None else ()),
        *spec.srun_args,
        *wrapper_command(spec),
    ]


def wrapper_command(spec: LaunchSpec) -> list[str]:
    """``PYTHON -m metaq_py.launch [--sha256 HEX] STEP_FILE SCRIPT``: the script started on
    another node (in a step of its own, or by the node's agent), run only as it was checked."""
    script = os.path.abspath(spec.script)
    checked: list[str] = []
    if spec.program is not None:
        script = os.path.abspath(spec.program.source)
        checked = ["--sha256", spec.program.digest]
    return [sys.executable, "-m", "metaq_py.launch", *checked,
            os.path.abspath(spec.step_file), script]


def task_environment(spec: LaunchSpec, base: Mapping[str, str]) -> dict[str, str]:
    """The environment ``spec``'s script starts with, built on ``base``."""
    env = {**base, **spec.env}
    if env.get("SLURM_JOB_ID"):
        from metaq_py.launch.slurm_step import slurm_task_env  # inside a SLURM job only
        env = slurm_task_env(env, len(spec.nodes))
    env.update(
        METAQ_TASK=spec.task,
        METAQ_SCRIPT=os.path.abspath(spec.script),
        METAQ_ATTEMPT=str(spec.attempt),
        METAQ_RESUME="1" if spec.resume else "0",
        METAQ_NODELIST=",".join(spec.nodes),
        METAQ_NNODES=str(len(spec.nodes)),
        METAQ_HOSTFILE=os.path.abspath(spec.hostfile),
        METAQ_LOG=os.path.abspath(spec.log),
    )
    if spec.mpirun:
        env["METAQ_MPIRUN"] = " ".join(spec.mpirun)
    if spec.run_folder:  # where these files go (see LaunchSpec)
        env.update(METAQ_CHECKPOINT_FILE=os.path.abspath(spec.checkpoint_file),
                   METAQ_RESIZE_FILE=os.path.abspath(spec.resize_file))
    else:
        env.pop("METAQ_CHECKPOINT_FILE", None)  # never a runner's own, inherited
        env.pop("METAQ_RESIZE_FILE", None)
    if spec.gpus is not None:
        env[gpu_variable(base)] = ",".join(spec.gpus)
    if spec.cores is not None:
        env["METAQ_CPUS"] = ",".join(map(str, spec.cores))
        env["METAQ_NCPUS"] = str(len(spec.cores))
        env["METAQ_CPU_MASK"] = cpu_mask(spec.cores)
    return env


def gpu_variable(base: Mapping[str, str]) -> str:
    """The variable naming a task's GPUs: ``ROCR_VISIBLE_DEVICES`` (AMD nodes) or
    ``ZE_AFFINITY_MASK`` (Intel nodes) where the batch job set it, else
    ``CUDA_VISIBLE_DEVICES``."""
    for name in _VENDOR_VARIABLES:
        if base.get(name) is not None:
            return name
    return "CUDA_VISIBLE_DEVICES"


_VENDOR_VARIABLES = ("ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK")
"""The GPU variables of AMD and Intel nodes, looked for in this order."""

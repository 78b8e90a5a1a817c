"""Launching: how a task's script is started on its nodes, watched, signalled and stopped.

The runner describes one start of one task as a :class:`LaunchSpec` and calls
:func:`launch`, which returns a :class:`TaskProcess`::

    events: queue.Queue = queue.Queue()
    spec = LaunchSpec(script=path, task="todo/a/run.sh", nodes=("n1", "n2"), gpus=("0",),
                      log=logs / "todo__a__run.sh.1.log", rundir=runs / "todo__a__run.sh",
                      attempt=1, tee=log_directive)
    proc = launch(spec, on_exit=events.put)
    ...
    finished = events.get(timeout=until_next_deadline)   # a TaskProcess, when one ends
    finished.status.ok, str(finished.status)             # "exit code 3", "killed by SIGTERM"
    proc.send_signal(signal.SIGUSR1)                     # to its whole process group
    proc.terminate(grace=30)                             # signal, wait, then SIGKILL
    terminate_all(running, grace=30)                     # the same for many, in parallel

The modules: :mod:`~metaq_py.launch.spec` (the value), :mod:`~metaq_py.launch.command`
(argument vector and environment), :mod:`~metaq_py.launch.hostfiles` (one hostfile per
distinct host list, shared), :mod:`~metaq_py.launch.slurm_step` (srun's counts inside a
task), :mod:`~metaq_py.launch.tee` (output into two files), :mod:`~metaq_py.launch.prepare`
(all a start does before the process exists), :mod:`~metaq_py.launch.process` (processes,
exits, signals), and ``python -m metaq_py.launch SCRIPT``, the first command of
a task wrapped in its own ``srun`` step (:mod:`metaq_py.launch.__main__`).
"""

from metaq_py.launch.command import task_command, task_environment
from metaq_py.launch.hostfiles import HostFiles
from metaq_py.launch.process import ExitStatus, TaskProcess, launch, terminate_all
from metaq_py.launch.spec import LaunchError, LaunchSpec

__all__ = [
    "ExitStatus",
    "HostFiles",
    "LaunchError",
    "LaunchSpec",
    "TaskProcess",
    "launch",
    "task_command",
    "task_environment",
    "terminate_all",
]

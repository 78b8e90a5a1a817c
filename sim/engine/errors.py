"""The simulator's own error, in a module of its own: mypyc compiles :mod:`sim.engine.core`, and a
compiled class cannot derive from ``RuntimeError``."""


class SimulationError(RuntimeError):
    """The scheduler asked for something the Cluster refused: a bug in a policy."""

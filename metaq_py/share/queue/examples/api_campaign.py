#!/usr/bin/env python3
"""A lattice campaign built from Python with metaq_py's API (docs/user-guide.md, "From Python").

For each gauge configuration: one propagator (a GPU task on nodes), then its contractions
(a share of one node: a few cores and one GPU) once the propagator has finished; one analysis
waits for every contraction. Each kind of task is a class with a prologue, the work and an
epilogue; each task is one ``submit`` call, so nothing is written by hand and every task is
judged exactly as ``metaq submit`` judges a script.

    metaq init /tmp/q
    python metaq_py/share/queue/examples/api_campaign.py --queue /tmp/q --configs 4 \
        --out /tmp/campaign
    metaq run --queue /tmp/q --nodes 2 --walltime 1h

The work itself is a stand-in (``echo`` and ``sleep``), so the campaign runs anywhere; a real
one would call its solvers in ``run``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import metaq_py
from metaq_py.api import Line, Shape, TaskKind


def _append(line: str, path: Path) -> list[str]:
    """A command that adds ``line`` to the file ``path`` (the path passed as a word, so that
    no part of it is read by the shell)."""
    return ["sh", "-c", f'echo "{line}" >> "$1"', "-", str(path)]


def _write(line: str, path: Path) -> list[str]:
    """A command that writes ``line`` as the whole of the file ``path``."""
    return ["sh", "-c", f'echo "{line}" > "$1"', "-", str(path)]


class OnConfiguration(TaskKind):
    """A task on one gauge configuration, noting its start and end in ``order.log``."""

    min_wc_time = "10m"
    project = "lattice"

    def __init__(self, cfg: int, out: Path) -> None:
        self.cfg, self.out = cfg, out

    @property
    def order_log(self) -> Path:
        return self.out / "order.log"


class Propagator(OnConfiguration):
    """Quark propagators on one configuration: one whole node for 10 minutes, or two for 5
    (a real one adds ``gpus``); the shape that starts soonest runs."""

    nodes = 1
    shapes = (Shape(nodes=2, min_wc_time="5m"),)
    checkpoint = ("5m", "10s")
    signal = "USR1@30"

    def prologue(self) -> list[Line]:
        return [["mkdir", "-p", str(self.out)],
                _append(f"start prop {self.cfg}", self.order_log)]

    def run(self) -> list[Line]:
        return [["sleep", "0.2"],
                _write(f"propagator {self.cfg}", self.out / f"prop.{self.cfg}")]

    def epilogue(self) -> list[Line]:
        return [_append(f"end prop {self.cfg}", self.order_log)]


class Contraction(OnConfiguration):
    """The contractions of one configuration's propagator: a share of a node."""

    cpus = 1

    def prologue(self) -> list[Line]:
        return [["test", "-s", str(self.out / f"prop.{self.cfg}")],
                _append(f"start contract {self.cfg}", self.order_log)]

    def run(self) -> list[Line]:
        return [_write(f"correlator {self.cfg}", self.out / f"contract.{self.cfg}")]

    def epilogue(self) -> list[Line]:
        return [_append(f"end contract {self.cfg}", self.order_log)]


class Analysis(TaskKind):
    """Every correlator together."""

    min_wc_time = "10m"
    project = "lattice"

    def __init__(self, configs: int, out: Path) -> None:
        self.configs, self.out = configs, out

    def run(self) -> list[Line]:
        parts = [str(self.out / f"contract.{c}") for c in range(self.configs)]
        return [["sh", "-c", 'out="$1"; shift; cat "$@" > "$out"', "-",
                 str(self.out / "analysis.out"), *parts]]


def build(queue: Path, configs: int, out: Path) -> list[str]:
    """Submit the campaign to ``queue``; the identities of the tasks made, in order."""
    q = metaq_py.open_queue(queue)
    made: list[str] = []
    for cfg in range(configs):
        prop = q.submit(f"prop_{cfg}.sh", kind=Propagator(cfg, out), priority=configs - cfg)
        made.append(prop.id)
        made.append(q.submit(f"contract_{cfg}.sh", kind=Contraction(cfg, out),
                             after=prop.id).id)
    contractions = [m for m in made if "/contract_" in m]
    made.append(q.submit("analysis.sh", kind=Analysis(configs, out), after=contractions).id)
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queue", type=Path, default=Path("queue"), help="the queue folder")
    parser.add_argument("--configs", type=int, default=4, help="gauge configurations")
    parser.add_argument("--out", type=Path, default=Path("campaign-out"),
                        help="where the tasks write their results")
    args = parser.parse_args()
    for ident in build(args.queue, args.configs, args.out.absolute()):
        print(f"submitted {ident}")


if __name__ == "__main__":
    main()

"""share/queue/examples/api_campaign.py: a lattice campaign built with the Python API, run for real
with ``metaq run --batch local``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from metaq_py.queue.judge import judge
from tests.cli.test_queue import REPO, metaq

SCRIPT = REPO / "metaq_py" / "share" / "queue" / "examples" / "api_campaign.py"


def test_the_example_builds_the_campaign_and_metaq_run_runs_it_in_order(tmp_path: Path
                                                                         ) -> None:
    q, out = tmp_path / "q", tmp_path / "out"
    assert metaq("init", str(q)).returncode == 0
    (q / "metaq.yaml").write_text("poll_interval: 1s\n")
    built = subprocess.run([sys.executable, str(SCRIPT), "--queue", str(q), "--configs", "3",
                            "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert built.returncode == 0, built.stderr
    made = [line.removeprefix("submitted ") for line in built.stdout.splitlines()]
    assert made == ["todo/prop_0.sh", "todo/contract_0.sh", "todo/prop_1.sh",
                    "todo/contract_1.sh", "todo/prop_2.sh", "todo/contract_2.sh",
                    "todo/analysis.sh"]
    specs = {m: judge(q / m).accepted() for m in made}
    prop = specs["todo/prop_1.sh"]
    assert (prop.nodes, prop.cpus, prop.min_wc_time, prop.project, prop.priority) == \
        (1, 0, 600.0, "lattice", 2)
    assert prop.checkpoint is not None and prop.signal is not None
    assert [(s.nodes, s.min_wc_time) for s in prop.shapes] == [(2, 300.0)]
    contract = specs["todo/contract_1.sh"]
    assert (contract.cpus, contract.after, contract.checkpoint) == (1, ("todo/prop_1.sh",), None)
    assert specs["todo/analysis.sh"].after == tuple(m for m in made if "contract_" in m)

    run = metaq("run", "--queue", str(q), "--nodes", "2", "--walltime", "1h",
                "--batch", "local", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    lines = (out / "order.log").read_text().splitlines()
    assert sorted(lines) == sorted(f"{edge} {step} {c}" for edge in ("start", "end")
                                   for step in ("prop", "contract") for c in range(3))
    at = {line: n for n, line in enumerate(lines)}
    for c in range(3):
        assert at[f"end prop {c}"] < at[f"start contract {c}"]
    assert (out / "analysis.out").read_text().splitlines() == \
        [f"correlator {c}" for c in range(3)]
    assert sorted(p.name for p in (q / "finished" / "todo").glob("[!.]*")) == \
        sorted(m.removeprefix("todo/") for m in made)

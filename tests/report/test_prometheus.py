"""``metaq status --prometheus`` (:mod:`metaq_py.report.prometheus`): the status value in the
Prometheus text format, read back by the reference parser (``prometheus_client``) and by a
real node_exporter's textfile collector, as a site would deploy it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import urllib.request
from collections import Counter
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from metaq_py.cli import app
from metaq_py.report.prometheus import exposition
from metaq_py.report.status import QueueStatus
from metaq_py.report.summary import QueueCounts
from tests.capability import missing
from tests.runner_helpers import make_queue, runner, task, wait_until


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of an exposition, by name and labels, as the reference parser reads it."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _value(samples: dict, name: str, **labels: str) -> float | None:
    matching = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= ls]
    assert len(matching) <= 1, matching
    return matching[0] if matching else None


@settings(max_examples=200, deadline=None)
@given(projects=st.dictionaries(st.text(min_size=1, max_size=30),
                                st.integers(min_value=0, max_value=10**7), max_size=5),
       queue=st.text(min_size=1, max_size=40))
def test_any_project_and_queue_name_reads_back_exactly(projects: dict[str, int],
                                                       queue: str) -> None:
    counts = QueueCounts(states={"pending": Counter(todo=sum(projects.values()))},
                         projects={p: Counter(pending=n) for p, n in projects.items()},
                         campaigns={})
    status = QueueStatus(queue=queue, now=0.0, counts=counts, running=(), allocations=(),
                         notices=(), alloc=(), problems=())
    samples = _samples(exposition(status))
    read = {dict(ls)["project"]: v for (n, ls), v in samples.items()
            if n == "metaq_project_tasks"}
    assert read == {p: float(n) for p, n in projects.items()}
    assert {dict(ls)["queue"] for _n, ls in samples} == {queue}


def _running(tmp_path: Path) -> tuple[object, object, Path, threading.Thread]:
    """A queue with one task running in a 2-node runner, one waiting and one held."""
    q = make_queue(tmp_path / "q")
    seen, go = tmp_path / "started", tmp_path / "go"
    task(q, "wait.sh", f"touch {seen}; while [ ! -e {go} ]; do sleep 0.05; done",
         PROJECT="lattice")
    task(q, "later.sh", "true", NODES=4, PROJECT="lattice")
    task(q, "h.sh", "true", folder="hold")
    r = runner(q, nodes=2)
    thread = threading.Thread(target=r.run)
    thread.start()
    assert wait_until(seen.exists, 20)
    return q, r, go, thread


def test_status_prometheus_counts_what_runs_and_waits(tmp_path: Path) -> None:
    q, r, go, thread = _running(tmp_path)
    try:
        out = CliRunner().invoke(app, ["status", "--prometheus", "-q", str(q.root)])
        assert out.exit_code == 0, out.output
        samples = _samples(out.output)
        assert _value(samples, "metaq_tasks", state="working", folder="todo") == 1
        assert _value(samples, "metaq_tasks", state="pending", folder="todo") == 1
        assert _value(samples, "metaq_tasks", state="hold", folder="todo") == 1
        assert _value(samples, "metaq_project_tasks", project="lattice", state="working") == 1
        assert _value(samples, "metaq_running_tasks", job=r.jobid) == 1
        assert _value(samples, "metaq_allocation_nodes", job=r.jobid) == 2
        assert _value(samples, "metaq_allocation_idle_nodes", job=r.jobid) == 1
        assert _value(samples, "metaq_invalid_files") == 0
    finally:
        go.touch()
        thread.join(30)
    after = _samples(CliRunner().invoke(
        app, ["status", "--prometheus", "-q", str(q.root)]).output)
    assert _value(after, "metaq_running_tasks") is None  # no job runs a task any more


def test_prometheus_with_json_or_watch_is_refused_in_one_sentence(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    for other in ("--json", "--watch"):
        out = CliRunner().invoke(app, ["status", "--prometheus", other, "-q", str(q.root)])
        assert out.exit_code != 0
        assert "give one of them" in out.output and out.output.count("\n") == 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_node_exporters_textfile_collector_reads_the_file(tmp_path: Path) -> None:
    exporter = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    if exporter is None:
        missing("node_exporter is not installed (apt-get install prometheus-node-exporter; "
                ".ci/run does)")
    q = make_queue(tmp_path / 'q"1\\')  # a quote and a backslash in the queue label
    task(q, "a.sh", "true", PROJECT='a"b\\c')  # and in the project's
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    out = CliRunner().invoke(app, ["status", "--prometheus", "-q", str(q.root)])
    assert out.exit_code == 0, out.output
    staged = textfiles / "metaq.prom.tmp"  # written aside, then renamed, as its docs ask
    staged.write_text(out.output)
    os.replace(staged, textfiles / "metaq.prom")
    port = _free_port()
    proc = subprocess.Popen(
        [exporter, "--collector.disable-defaults", "--collector.textfile",
         f"--collector.textfile.directory={textfiles}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def scrape() -> str | None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                            timeout=2) as page:
                    return page.read().decode()
            except OSError:
                return None

        assert wait_until(lambda: scrape() is not None, 20)
        page = scrape()
        assert page is not None
        samples = _samples(page)
        assert _value(samples, "node_textfile_scrape_error") == 0
        assert _value(samples, "metaq_project_tasks", project='a"b\\c', state="pending",
                      queue=str(q.root)) == 1
        assert _value(samples, "metaq_tasks", state="pending", folder="todo") == 1
    finally:
        proc.terminate()
        proc.wait(10)

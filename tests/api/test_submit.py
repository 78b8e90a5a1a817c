"""metaq_py.open_queue(...).submit(...): tasks made from Python, judged as metaq submit judges.

The refusals are compared with the real ``metaq submit`` command on the same bad inputs: a
script file holding the directive lines the keywords stand for."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import metaq_py
from metaq_py.api import Shape, TaskKind, TaskQueue
from metaq_py.errors import MetaqError, QueueError, TaskError
from metaq_py.policy.model import Kind
from metaq_py.queue.judge import judge
from tests.cli.test_queue import REPO, metaq


@pytest.fixture
def q(tmp_path: Path) -> TaskQueue:
    root = tmp_path / "q"
    assert metaq("init", str(root)).returncode == 0
    (root / "metaq.yaml").write_text("caps:\n  nodes: 64\n  gpus: 32\n")
    return metaq_py.open_queue(root)


def test_keywords_become_the_directives_of_the_queued_task(q: TaskQueue) -> None:
    made = q.submit("prop.sh", command=["./prop", "--cfg", "a b"], nodes=16, min_nodes=4,
                    type="malleable", gpus=8, min_wc_time=5400, project="lattice",
                    priority=-3, setup="5m", checkpoint=(1800, "2m"), signal="USR1@90",
                    retries=2, resize="in-place USR2")
    assert made.id == "todo/prop.sh" and made.path == q.root / "todo" / "prop.sh"
    spec = judge(made.path).accepted()
    assert (spec.nodes, spec.min_nodes, spec.type, spec.gpus) == (16, 4, Kind.MALLEABLE, 8)
    assert (spec.min_wc_time, spec.project, spec.priority, spec.setup) == \
        (5400.0, "lattice", -3, 300.0)
    assert spec.checkpoint is not None and \
        (spec.checkpoint.interval, spec.checkpoint.cost) == (1800.0, 120.0)
    assert spec.signal is not None and (spec.signal.name, spec.signal.before) == ("USR1", 90.0)
    assert (spec.retries, spec.resize and spec.resize.signal) == (2, "USR2")
    # the command's words stay words: the one with a space is quoted for the shell
    assert made.path.read_text().rstrip().endswith("./prop --cfg 'a b'")


def test_shapes_become_shape_lines_and_a_kind_may_list_them(q: TaskQueue) -> None:
    made = q.submit("prop.sh", command="./prop", nodes=4, gpus=16, min_wc_time="2h",
                    shapes=[Shape(nodes=8, gpus=32, min_wc_time="1h"), Shape(min_wc_time="3h")])
    spec = judge(made.path).accepted()
    assert [(s.nodes, s.gpus, s.min_wc_time) for s in spec.shapes] == \
        [(8, 32, 3600.0), (4, 16, 3 * 3600.0)]

    class Contraction(TaskKind):
        cpus = 8
        gpus = 1
        min_wc_time = "30m"
        shapes = (Shape(nodes=1, gpus=4, min_wc_time="10m"),)

        def run(self) -> list[str]:
            return ["./contract"]

    spec = judge(q.submit("c.sh", kind=Contraction()).path).accepted()
    assert (spec.cpus, spec.gpus) == (8, 1)
    [shape] = spec.shapes
    assert (shape.nodes, shape.cpus, shape.gpus, shape.min_wc_time) == (1, 0, 4, 600.0)


def test_a_body_with_metaq_lines_needs_header_only_as_metaq_submit_does(q: TaskQueue) -> None:
    body = "cat > next.sh <<EOF\n#!/bin/sh\n#METAQ NODES 8\nEOF"
    with pytest.raises(TaskError, match=r"^gen.sh: this #METAQ line comes after the first"):
        q.submit("gen.sh", script=body, nodes=2)
    assert not list((q.root / "todo").iterdir())
    made = q.submit("gen.sh", script=body, nodes=2, header_only=True)
    spec = judge(made.path).accepted()
    assert (spec.nodes, spec.header_only) == (2, True)
    assert made.path.read_text().count("#METAQ HEADER_ONLY\n") == 1


def test_placement_flags_hold_and_sub_folder_as_metaq_submit(q: TaskQueue) -> None:
    held = q.submit("a.sh", command="true", hold=True, folder="alice/run7")
    assert held.id == "todo/alice/run7/a.sh"
    assert held.path == q.root / "hold" / "todo" / "alice" / "run7" / "a.sh"
    urgent = q.submit("b.sh", command="true", priority_folder=True)
    assert urgent.id == "priority/b.sh" and urgent.path == q.root / "priority" / "b.sh"


def test_after_names_resolve_and_arrays_make_one_task_per_index(q: TaskQueue) -> None:
    q.submit("prop.sh", command="true", array="0-3")
    made = q.submit("contract.sh", command="true", array="0-3", after="prop.sh[{index}]")
    for i in range(4):
        spec = judge(made.path / str(i)).accepted()
        assert spec.after == (f"todo/prop.sh/{i}",)
    with pytest.raises(QueueError, match="names no task, array or glob"):
        q.submit("analysis.sh", command="true", after=["contract.sh", "nothing-*.sh"])
    assert not (q.root / "todo" / "analysis.sh").exists()


# Each bad input as keywords, and as the directive lines a script file gives metaq submit.
BAD = [
    ({"nodes": 0}, ["NODES 0"]),
    ({"nodes": "two"}, ["NODES two"]),
    ({"min_wc_time": "soon"}, ["MIN_WC_TIME soon"]),
    ({"type": "elastic"}, ["TYPE elastic"]),
    ({"min_nodes": 2, "nodes": 4}, ["NODES 4", "MIN_NODES 2"]),
    ({"signal": "KILL@60"}, ["SIGNAL KILL@60"]),
    ({"project": "two words"}, ["PROJECT two words"]),
    ({"log": "$HOME/out.log"}, ["LOG $HOME/out.log"]),
    ({"cpus": 8, "nodes": 2}, ["NODES 2", "CPUS 8"]),
    ({"checkpoint": "1h"}, ["CHECKPOINT 1h"]),
    ({"array": "5-1"}, ["ARRAY 5-1"]),
    ({"nodes": 65}, ["NODES 65"]),  # above the queue's cap: admission, not parsing
    ({"gpus": 33}, ["GPUS 33"]),
    ({"after": "nothing.sh"}, ["AFTER nothing.sh"]),
    ({"after": "../up.sh"}, ["AFTER ../up.sh"]),
    ({"nodes": 2, "shapes": [Shape(nodes=2)]}, ["NODES 2", "SHAPE NODES 2"]),
    ({"type": "malleable", "shapes": [Shape(nodes=2)]}, ["TYPE malleable", "SHAPE NODES 2"]),
    ({"shapes": [Shape(nodes=65)]}, ["SHAPE NODES 65"]),
    ({"shapes": [Shape(cpus=4, gpus=33)]}, ["SHAPE CPUS 4 GPUS 33"]),
]


@pytest.mark.parametrize(("keywords", "lines"), BAD, ids=[str(b[1]) for b in BAD])
def test_refusals_are_the_sentences_metaq_submit_prints(q: TaskQueue, tmp_path: Path,
                                                         keywords: dict, lines: list[str]
                                                         ) -> None:
    script = tmp_path / "bad.sh"
    script.write_text("#!/bin/bash\n" + "".join(f"#METAQ {x}\n" for x in lines) + "true\n")
    script.chmod(0o755)
    cli = metaq("submit", "--queue", str(q.root), str(script))
    assert cli.returncode == 1 and cli.stderr.startswith("metaq: "), cli.stderr
    with pytest.raises(MetaqError) as err:
        q.submit("bad.sh", command="true", **keywords)
    said = cli.stderr.strip()
    if isinstance(err.value, TaskError):
        # the same sentence; the file names the place, the API the task (never a temp path)
        sentence = str(err.value).removeprefix("bad.sh: ")
        assert str(err.value) == f"bad.sh: {sentence}"
        assert re.fullmatch(rf"metaq: {re.escape(str(script))}(, line \d+)?: "
                            rf"{re.escape(sentence)}", said), (said, sentence)
    else:
        assert said == f"metaq: {err.value}"
    assert not list((q.root / "todo").iterdir())


def test_what_a_directive_line_cannot_carry_is_refused_before_anything_is_written(
        q: TaskQueue) -> None:
    with pytest.raises(TaskError, match="PROJECT has a control character"):
        q.submit("a.sh", command="true", project="lat\n#METAQ NODES 64")
    with pytest.raises(TaskError, match="starts a comment"):
        q.submit("a.sh", command="true", project="lat #x")
    with pytest.raises(TaskError, match="exactly one of command, script and kind"):
        q.submit("a.sh", command="true", script="true")
    with pytest.raises(TaskError, match="nothing to run"):
        q.submit("a.sh", command="  ")
    with pytest.raises(QueueError, match="without '/'"):
        q.submit("sub/a.sh", command="true")
    with pytest.raises(TaskError, match="full path"):
        q.submit("a.sh", command="true", shell="bash")
    assert not list((q.root / "todo").iterdir())


def test_open_queue_refuses_a_folder_that_is_not_a_queue(tmp_path: Path) -> None:
    with pytest.raises(QueueError, match="there is no queue"):
        metaq_py.open_queue(tmp_path / "missing")
    (tmp_path / "plain").mkdir()
    with pytest.raises(QueueError, match="is not a queue"):
        metaq_py.open_queue(tmp_path / "plain")


WORD = st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zs", "Zl", "Zp")),
               min_size=1, max_size=12).filter(lambda w: "#" not in w and w.split() == [w])


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(nodes=st.integers(1, 64), gpus=st.integers(0, 32), priority=st.integers(-10**6, 10**6),
       wc=st.integers(1, 10**6), project=WORD, retries=st.integers(0, 100))
def test_any_valid_values_come_back_exactly_from_the_queued_file(
        q: TaskQueue, nodes: int, gpus: int, priority: int, wc: int, project: str,
        retries: int) -> None:
    made = q.submit("t.sh", script="echo one\necho two", nodes=nodes, gpus=gpus,
                    priority=priority, min_wc_time=wc, project=project, retries=retries)
    try:
        spec = judge(made.path).accepted()
        assert (spec.nodes, spec.gpus, spec.priority, spec.min_wc_time, spec.project,
                spec.retries) == (nodes, gpus, priority, float(wc), project, retries)
    finally:
        made.path.unlink()


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.text(max_size=20))
def test_no_text_value_ever_adds_a_directive(q: TaskQueue, value: str) -> None:
    try:
        made = q.submit("t.sh", command="true", project=value)
    except MetaqError:
        assert not (q.root / "todo" / "t.sh").exists()
        return
    spec = judge(made.path).accepted()
    made.path.unlink()
    assert spec.project == value
    assert [k for k, _ in spec.lines] == ["PROJECT"]


class Step(TaskKind):
    nodes = 2
    min_wc_time = "10m"

    def __init__(self, out: Path, fail_run: bool) -> None:
        self.out, self.fail_run = out, fail_run

    def prologue(self) -> list:
        return [["sh", "-c", f"echo prologue >> {self.out}"]]

    def run(self) -> list:
        return [f"echo run >> {self.out}", "exit 3" if self.fail_run else "true"]

    def epilogue(self) -> str:
        return f"echo epilogue >> {self.out}"


@pytest.mark.parametrize("fail_run", [False, True])
def test_a_kind_runs_its_steps_in_order_and_stops_at_the_first_failure(
        q: TaskQueue, tmp_path: Path, fail_run: bool) -> None:
    out = tmp_path / "steps.log"
    made = q.submit("s.sh", kind=Step(out, fail_run), priority=5, nodes=3)
    spec = judge(made.path).accepted()
    assert (spec.nodes, spec.priority, spec.min_wc_time) == (3, 5, 600.0)  # keywords win
    done = subprocess.run([str(made.path)], capture_output=True, timeout=30)
    if fail_run:
        assert done.returncode == 3
        assert out.read_text().split() == ["prologue", "run"]
    else:
        assert done.returncode == 0
        assert out.read_text().split() == ["prologue", "run", "epilogue"]


def test_a_kind_without_run_cannot_be_made() -> None:
    class Empty(TaskKind):
        nodes = 1

    with pytest.raises(TypeError, match="run"):
        Empty()  # type: ignore[abstract]


def test_importing_metaq_py_loads_no_queue_until_open_queue_is_asked_for() -> None:
    code = ("import sys, metaq_py; print('metaq_py.queue' in sys.modules); "
            "metaq_py.open_queue; print('metaq_py.queue' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, timeout=60)
    assert out.stdout.split() == ["False", "True"], out.stderr

"""Run folders only for the tasks that ask for one (issue 29, part 2): a plain task leaves no
folder in ``jobs/<jobid>/runs/`` and is given no checkpoint or resize file; a task with
``CHECKPOINT`` gets its run folder, its checkpoint file there, and the runner sees it write
one. Real runners, real task processes, real files."""

from __future__ import annotations

from pathlib import Path

from tests.runner_helpers import events, make_queue, of, runner, task, where


def test_a_plain_task_gets_no_run_folder(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    task(q, "plain.sh", 'echo "ckpt=${METAQ_CHECKPOINT_FILE-unset} '
                        'resize=${METAQ_RESIZE_FILE-unset}"\n')
    assert runner(q).run() == 0
    assert where(q, "plain.sh") == "finished"
    assert of(events(q), "start", task="todo/plain.sh")  # it ran
    assert [p for p in (q.root / "jobs").rglob("*") if "plain.sh" in p.name] == \
        list((q.root / "jobs").rglob("plain.sh.log"))  # its log, and no run folder
    logs = list((q.root / "jobs").rglob("plain.sh.log"))
    assert len(logs) == 1 and logs[0].read_text() == "ckpt=unset resize=unset\n"


def test_a_checkpointing_task_gets_its_run_folder_and_file(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    task(q, "ck.sh", 'echo step > "$METAQ_CHECKPOINT_FILE"\necho "$METAQ_CHECKPOINT_FILE"\n',
         CHECKPOINT="10m 1m")
    assert runner(q).run() == 0
    assert where(q, "ck.sh") == "finished"
    logs = list((q.root / "jobs").rglob("ck.sh.log"))
    assert len(logs) == 1
    written = Path(logs[0].read_text().strip())
    assert written.name == "checkpoint" and written.parent.name == "ck.sh"
    assert written.parent.parent.parent.name == "runs"
    assert written.read_text() == "step\n"

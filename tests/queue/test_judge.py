"""Judging a task file: which questions are asked, in what order, and what a verdict says."""

from __future__ import annotations

from pathlib import Path

import pytest

from metaq_py.directives import read_head
from metaq_py.errors import TaskError, TaskVanished
from metaq_py.queue.judge import judge
from metaq_py.queue.settings.config import Caps, QueueConfig
from metaq_py.queue.settings.trust import Trust

CAPPED = QueueConfig(caps=Caps(nodes=4))


def script(path: Path, text: str, mode: int = 0o755) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def test_a_good_script_is_accepted_with_its_spec(tmp_path: Path) -> None:
    path = script(tmp_path / "a.sh", "#!/bin/sh\n#METAQ NODES 2\ntrue\n")
    verdict = judge(path, root=tmp_path, config=CAPPED, trust=Trust(gid=None, uids=frozenset()))
    assert verdict.error is None and verdict.accepted().nodes == 2
    assert verdict.opened is not None and verdict.opened.st_ino == path.stat().st_ino


def test_the_queue_admits_only_with_its_settings(tmp_path: Path) -> None:
    path = script(tmp_path / "big.sh", "#!/bin/sh\n#METAQ NODES 8\ntrue\n")
    assert judge(path).spec is not None  # no queue: nothing to admit against
    verdict = judge(path, root=tmp_path, config=CAPPED)
    assert verdict.spec is None and verdict.content
    with pytest.raises(TaskError, match="at most 4"):
        verdict.accepted()
    with pytest.raises(ValueError, match="together"):
        judge(path, config=CAPPED)


def test_trust_is_judged_before_the_header_is_parsed(tmp_path: Path) -> None:
    path = script(tmp_path / "open.sh", "#!/bin/sh\n#METAQ NODES nope\n", mode=0o777)
    trust = Trust(gid=None, uids=frozenset())
    verdict = judge(path, trust=trust)
    assert "writable by every user" in str(verdict.error) and not verdict.content
    assert judge(path).content  # without a trust rule, the header is what is wrong
    told = judge(script(tmp_path / "b.sh", "#!/bin/sh\n"), trust=trust,
                 folder_problem="the folder is writable by every user")
    assert str(told.error).startswith(f"{tmp_path / 'b.sh'}: the folder") and not told.content


def test_unreadable_and_vanished_files_have_no_stat(tmp_path: Path) -> None:
    gone = judge(tmp_path / "gone.sh")
    assert isinstance(gone.error, TaskVanished) and gone.opened is None
    plain = judge(script(tmp_path / "plain.sh", "#!/bin/sh\n", mode=0o644))
    assert "not executable" in str(plain.error) and plain.opened is None and not plain.content


def test_a_header_already_read_is_judged_as_read(tmp_path: Path) -> None:
    path = script(tmp_path / "a.sh", "#!/bin/sh\n#METAQ NODES 2\n")
    head = read_head(path)
    script(path, "#!/bin/sh\n#METAQ NODES 3\n")
    assert judge(path, head=head).accepted().nodes == 2

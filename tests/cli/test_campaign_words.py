"""A campaign in the words people use: ``check`` shows ``ARRAY`` and ``AFTER``, ``ls`` says
what a task waits on, ``ls running`` and ``ls waiting`` are states too, an index of an array
is ``prop.sh[13]`` wherever it is named, and ``retry`` says when a dependency failed."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_queue import metaq


def _script(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def _campaign(tmp_path: Path) -> Path:
    """prop.sh[10-14] and contract.sh[10-14], each index of contract after its prop."""
    q = tmp_path / "q"
    assert metaq("init", str(q)).returncode == 0
    prop = _script(tmp_path / "prop.sh", "#!/bin/sh\n#METAQ MIN_WC_TIME 1:00\necho p\n")
    contract = _script(tmp_path / "contract.sh", "#!/bin/sh\n#METAQ MIN_WC_TIME 1:00\n"
                       "#METAQ AFTER prop.sh[{index}]\necho c\n")
    done = metaq("submit", "--array", "10-14", str(prop), str(contract), "--queue", str(q))
    assert done.returncode == 0, done.stderr
    return q


def test_check_shows_array_and_after(tmp_path: Path) -> None:
    task = _script(tmp_path / "c.sh", "#!/bin/sh\n#METAQ ARRAY 0-3\n#METAQ AFTER "
                   "prop.sh[{index}]\n#METAQ AFTER_ANY setup.sh\necho\n")
    r = metaq("check", str(task))
    assert r.returncode == 0, r.stderr
    assert "  array        0-3\n" in r.stdout
    assert "  after        prop.sh[{index}] (to finish)\n" in r.stdout
    assert "  after_any    setup.sh (to end, however)\n" in r.stdout


def test_ls_says_what_a_task_waits_on(tmp_path: Path) -> None:
    q = _campaign(tmp_path)
    each = metaq("ls", "--each", "--queue", str(q))
    assert each.returncode == 0, each.stderr
    rows = {line.split()[0]: line for line in each.stdout.splitlines()[3:]}
    assert set(rows) == {f"todo/{s}.sh[{i}]" for s in ("prop", "contract")
                         for i in range(10, 15)}
    assert rows["todo/contract.sh[13]"].endswith("waiting on todo/prop.sh[13] (waiting)")
    assert not rows["todo/prop.sh[13]"].endswith(")")
    whole = metaq("ls", "waiting", "--queue", str(q)).stdout
    assert whole.splitlines()[0] == f"pending in {q}"
    assert "todo/contract.sh[10-14]" in whole
    assert whole.rstrip().endswith("5 tasks of an array, 5 waiting on their dependencies "
                                   "(ls --each names them)")


def test_ls_takes_the_states_as_people_say_them(tmp_path: Path) -> None:
    q = tmp_path / "q"
    assert metaq("init", str(q)).returncode == 0
    for said, state in (("running", "working"), ("waiting", "pending"), ("held", "hold")):
        r = metaq("ls", said, "--queue", str(q))
        assert r.returncode == 0 and r.stdout.splitlines()[0] == f"{state} in {q}", r.stderr
    wrong = metaq("ls", "sleeping", "--queue", str(q))
    assert wrong.returncode == 1 and wrong.stderr.startswith("metaq: 'sleeping' is not a "
                                                             "state; use one of ")


def test_a_failed_dependency_is_named_by_ls_and_retry(tmp_path: Path) -> None:
    q = _campaign(tmp_path)
    cancel = metaq("cancel", "prop.sh[13]", "--queue", str(q))
    assert cancel.stdout == "cancel: todo/prop.sh[13] -> cancelled/todo/prop.sh/13\n"
    each = metaq("ls", "--each", "--queue", str(q)).stdout
    assert "dependency todo/prop.sh[13] was cancelled: the next runner moves it to " \
           "failed/" in each
    assert metaq("run", "--queue", str(q), "--batch", "local").returncode == 0
    failed = metaq("ls", "failed", "--queue", str(q)).stdout.splitlines()[3:]
    assert [line.split()[0] for line in failed] == ["todo/contract.sh[13]"]
    again = metaq("retry", "contract.sh[13]", "--queue", str(q))
    assert again.returncode == 0
    assert again.stdout == "retry: todo/contract.sh[13] -> todo/contract.sh/13\n"
    assert again.stderr == ("warning: todo/contract.sh[13] is back, but its dependency "
                            "todo/prop.sh[13] was cancelled: the next runner moves it to "
                            "failed/ again unless 'metaq retry todo/prop.sh[13]' comes "
                            "first\n")
    assert metaq("show", "contract.sh[13]", "--queue", str(q)).stdout.startswith(
        "todo/contract.sh[13]: pending (")
    # As the warning says: the dependency first, and both run.
    first = metaq("retry", "todo/prop.sh[13]", "--queue", str(q))
    assert first.returncode == 0 and first.stderr == "", first.stderr
    assert metaq("run", "--queue", str(q), "--batch", "local").returncode == 0
    assert (q / "finished" / "todo" / "contract.sh" / "13").is_file()


def test_retrying_both_in_one_command_warns_of_nothing(tmp_path: Path) -> None:
    q = _campaign(tmp_path)
    assert metaq("cancel", "prop.sh[13]", "--queue", str(q)).returncode == 0
    assert metaq("run", "--queue", str(q), "--batch", "local").returncode == 0
    both = metaq("retry", "contract.sh[13]", "prop.sh[13]", "--queue", str(q))
    assert both.returncode == 0 and both.stderr == "", both.stderr


def test_short_names_reach_arrays_in_sub_folders(tmp_path: Path) -> None:
    q = tmp_path / "q"
    assert metaq("init", str(q)).returncode == 0
    prop = _script(tmp_path / "prop.sh", '#!/bin/sh\n#METAQ MIN_WC_TIME 1:00\n'
                   '[ "$METAQ_ARRAY_INDEX" = 2 ] && exit 4\nexit 0\n')
    sub = metaq("submit", "--array", "0-3", "--folder", "batch1", str(prop), "--queue", str(q))
    assert sub.returncode == 0, sub.stderr
    cancel = metaq("cancel", "prop.sh[1]", "--queue", str(q))
    assert cancel.stdout == "cancel: todo/batch1/prop.sh[1] -> " \
                            "cancelled/todo/batch1/prop.sh/1\n", cancel.stderr
    assert metaq("run", "--queue", str(q), "--batch", "local").returncode == 0
    retry = metaq("retry", "prop.sh", "--failed", "--queue", str(q))
    assert retry.stdout == "retry: todo/batch1/prop.sh[2] -> todo/batch1/prop.sh/2\n", \
        retry.stderr
    # A second array of that name: the short name is refused with both, the longer taken.
    sub = metaq("submit", "--array", "0-1", "--folder", "batch2", "--again", str(prop),
                "--queue", str(q))  # the same indices of the same script: --again
    assert sub.returncode == 0, sub.stderr
    both = metaq("cancel", "prop.sh[1]", "--queue", str(q))
    assert both.returncode == 1 and both.stderr == (
        "metaq: 2 arrays are called 'prop.sh': todo/batch1/prop.sh, todo/batch2/prop.sh; "
        "name one by its <folder>/<path>, such as todo/batch1/prop.sh.\n")
    one = metaq("cancel", "batch2/prop.sh[1]", "--queue", str(q))
    assert one.stdout == "cancel: todo/batch2/prop.sh[1] -> " \
                         "cancelled/todo/batch2/prop.sh/1\n", one.stderr


def test_a_bare_after_name_prefers_its_command_then_its_folder(tmp_path: Path) -> None:
    q = tmp_path / "q"
    assert metaq("init", str(q)).returncode == 0
    prop = _script(tmp_path / "prop.sh", "#!/bin/sh\n#METAQ MIN_WC_TIME 1:00\nexit 0\n")
    contract = _script(tmp_path / "contract.sh", "#!/bin/sh\n#METAQ MIN_WC_TIME 1:00\n"
                       "#METAQ AFTER prop.sh[{index}]\nexit 0\n")
    for batch in ((), ("--folder", "batch2")):
        done = metaq("submit", "--array", "20-21", *batch, "--again", str(prop), str(contract),
                     "--queue", str(q))
        assert done.returncode == 0, done.stderr
    # The second command's contract.sh waits on its own prop.sh, not the first one's.
    assert "#METAQ AFTER todo/batch2/prop.sh/21\n" in \
        (q / "todo/batch2/contract.sh/21").read_text()
    assert "#METAQ AFTER todo/prop.sh/21\n" in (q / "todo/contract.sh/21").read_text()
    # Submitted later into batch2, a script naming prop.sh takes its own folder's.
    late = _script(tmp_path / "late.sh", "#!/bin/sh\n#METAQ MIN_WC_TIME 1:00\n"
                   "#METAQ AFTER prop.sh\nexit 0\n")
    done = metaq("submit", "--folder", "batch2", str(late), "--queue", str(q))
    assert done.returncode == 0, done.stderr
    assert "#METAQ AFTER todo/batch2/prop.sh\n" in (q / "todo/batch2/late.sh").read_text()
    # From a third folder, two arrays deeper than the task folder are refused with both.
    alone = tmp_path / "alone"
    alone.mkdir()
    deep = _script(alone / "prop.sh", "#!/bin/sh\n#METAQ MIN_WC_TIME 1:00\nexit 0\n")
    for batch in ("b5", "b6"):
        assert metaq("submit", "--array", "0-1", "--folder", batch, "--again", str(deep),
                     "--queue", str(q)).returncode == 0
    other = _script(alone / "use.sh", "#!/bin/sh\n#METAQ MIN_WC_TIME 1:00\n"
                    "#METAQ AFTER b5/prop.sh\nexit 0\n")
    done = metaq("submit", "--folder", "b7", str(other), "--queue", str(q))
    assert done.returncode == 0, done.stderr
    assert "#METAQ AFTER todo/b5/prop.sh\n" in (q / "todo/b7/use.sh").read_text()
    both = _script(alone / "both.sh", "#!/bin/sh\n#METAQ MIN_WC_TIME 1:00\n"
                   "#METAQ AFTER x/prop.sh\nexit 0\n")
    for batch in ("b8/x", "b9/x"):
        assert metaq("submit", "--array", "0-1", "--folder", batch, "--again", str(deep),
                     "--queue", str(q)).returncode == 0
    refused = metaq("submit", "--folder", "b7", str(both), "--queue", str(q))
    assert refused.returncode == 1 and refused.stderr == (
        "metaq: AFTER 'x/prop.sh' could mean 2 tasks: todo/b8/x/prop.sh, todo/b9/x/prop.sh; "
        "name one in full, such as todo/b8/x/prop.sh.\n")
    assert not (q / "todo/b7/both.sh").exists()


def test_an_arrays_log_has_its_index_and_doctor_takes_log(tmp_path: Path) -> None:
    q = tmp_path / "q"
    assert metaq("init", str(q)).returncode == 0
    prop = _script(tmp_path / "prop.sh", "#!/bin/sh\n#METAQ MIN_WC_TIME 1:00\n"
                   "#METAQ LOG log/prop_{index}.out\necho \"index $METAQ_ARRAY_INDEX\"\n")
    assert metaq("submit", "--array", "0-2", str(prop), "--queue", str(q)).returncode == 0
    assert "#METAQ LOG log/prop_2.out\n" in (q / "todo/prop.sh/2").read_text()
    assert metaq("run", "--queue", str(q), "--batch", "local").returncode == 0
    assert sorted(p.name for p in (q / "log").iterdir()) == [f"prop_{i}.out" for i in range(3)]
    assert all((q / "log" / f"prop_{i}.out").read_text() == f"index {i}\n" for i in range(3))
    doctor = metaq("doctor", "--queue", str(q))
    assert doctor.returncode == 0 and doctor.stdout == "no anomaly found\n", doctor.stdout

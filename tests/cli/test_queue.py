"""The collaborator commands, run as a real `metaq` process, and the checked-in examples."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "metaq_py" / "share" / "queue"


def metaq(*args: str, cwd: Path | None = None, env: dict | None = None
          ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "metaq_py", *args], cwd=cwd or REPO,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": "200", **(env or {})})


def tree(root: Path) -> dict[str, str]:
    """Every path below root with a digest of its content and mode."""
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        data = p.read_bytes() if p.is_file() else b""
        out[str(p.relative_to(root))] = f"{st.st_mode:o}:{hashlib.sha1(data).hexdigest()}"
    return out


def script(path: Path, directives: str = "", mode: int = 0o755) -> Path:
    path.write_text(f"#!/bin/sh\n{directives}echo hi\n")
    path.chmod(mode)
    return path


def example_scripts() -> list[Path]:
    return sorted(p for p in EXAMPLES.rglob("*.sh"))


def test_examples_exist_and_cover_every_kind() -> None:
    text = "".join(p.read_text() for p in example_scripts())
    assert len(example_scripts()) >= 4
    for needle in ("TYPE malleable", "TYPE ondemand", "GPUS", "RESIZE"):
        assert needle in text
    assert not (EXAMPLES / "__init__.py").exists()  # would shadow the standard library's queue


@pytest.mark.parametrize("path", example_scripts(), ids=lambda p: p.name)
def test_every_example_passes_check(path: Path) -> None:
    result = metaq("check", str(path), "--queue", str(EXAMPLES))
    assert result.returncode == 0, result.stderr
    assert "ok" in result.stdout and result.stderr == ""


def test_status_on_the_examples_is_read_only() -> None:
    before = tree(EXAMPLES)
    result = metaq("status", "--queue", str(EXAMPLES))
    assert result.returncode == 0, result.stderr
    assert "todo" in result.stdout and "priority" in result.stdout
    as_json = metaq("status", "--queue", str(EXAMPLES), "--json")
    data = json.loads(as_json.stdout)
    # examples/ holds scripts to submit (the campaign), not tasks of the example queue.
    tasks = [p for p in example_scripts() if "examples" not in p.relative_to(EXAMPLES).parts]
    assert data["totals"]["pending"] == len(tasks)
    assert data["invalid"] == []
    assert {"lattice", "alerts"} <= set(data["projects"])
    assert tree(EXAMPLES) == before  # nothing written into the checked-in queue


def test_queue_comes_from_env_then_default(tmp_path: Path) -> None:
    metaq("init", str(tmp_path / "envq"))
    via_env = metaq("status", "--json", env={"METAQ_QUEUE": str(tmp_path / "envq")})
    assert json.loads(via_env.stdout)["queue"] == str(tmp_path / "envq")
    (tmp_path / "work").mkdir()
    missing = metaq("status", cwd=tmp_path / "work")
    assert missing.returncode == 1
    assert missing.stderr.strip() == ("metaq: there is no queue at queue; create one with "
                                      "'metaq init queue' or pass --queue.")


def test_submit_flow(tmp_path: Path) -> None:
    q = tmp_path / "q"
    assert metaq("init", str(q)).returncode == 0
    a = script(tmp_path / "a.sh", "#METAQ NODES 2\n#METAQ PROJECT p1\n")
    b = script(tmp_path / "b.sh")
    r = metaq("submit", str(a), str(b), "--folder", "alice", "--queue", str(q))
    assert r.returncode == 0, r.stderr
    assert (q / "todo/alice/a.sh").exists() and (q / "todo/alice/b.sh").exists()
    r = metaq("submit", str(a), "--priority", "--hold", "--queue", str(q))
    assert r.returncode == 1 and "already in the queue, with the same content" in r.stderr
    r = metaq("submit", str(a), "--priority", "--hold", "--again", "--queue", str(q))
    assert r.returncode == 0 and (q / "hold/priority/a.sh").exists()
    listing = json.loads(metaq("ls", "--json", "--queue", str(q)).stdout)
    assert [e["task"] for e in listing] == ["todo/alice/a.sh", "todo/alice/b.sh"]
    assert listing[0]["spec"]["nodes"] == 2 and listing[0]["spec"]["project"] == "p1"
    assert metaq("hold", "todo/alice/b.sh", "--queue", str(q)).returncode == 0
    assert metaq("release", "todo/alice/b.sh", "--queue", str(q)).returncode == 0
    assert metaq("cancel", "todo/alice/b.sh", "--queue", str(q)).returncode == 0
    shown = json.loads(metaq("show", "todo/alice/b.sh", "--json", "--queue", str(q)).stdout)
    assert shown["state"] == "cancelled" and "cancelled by" in shown["reason"]
    assert metaq("retry", "todo/alice/b.sh", "--queue", str(q)).returncode == 0
    status = json.loads(metaq("status", "--json", "--queue", str(q)).stdout)
    assert status["totals"]["pending"] == 2 and status["totals"]["hold"] == 1
    assert status["projects"]["p1"] == {"pending": 1, "hold": 1}
    wrong = metaq("release", "todo/alice/a.sh", "--queue", str(q))
    assert wrong.returncode == 1
    assert wrong.stderr.strip() == "metaq: no task todo/alice/a.sh is held; it is waiting."


@pytest.mark.parametrize(
    ("content", "mode", "message"),
    [
        (b"#!/bin/sh\n#METAQ NODES 0\n", 0o755, "bad.sh, line 2: NODES must be at least 1, not 0."),
        (b"#!/bin/sh\n#METAQ NODES 1\n#METAQ NODES 2\n", 0o755,
         "bad.sh, line 3: NODES is given again (first on line 2); keep only one."),
        (b"#!/bin/sh\necho\n", 0o644, "bad.sh: the script is not executable; run chmod +x "),
        (b"\x00\x00", 0o755, "bad.sh, line 1: this is a binary file"),
    ],
)
def test_submit_refuses_bad_scripts_with_one_sentence(tmp_path: Path, content: bytes,
                                                      mode: int, message: str) -> None:
    q = tmp_path / "q"
    metaq("init", str(q))
    good = script(tmp_path / "good.sh")
    bad = tmp_path / "bad.sh"
    bad.write_bytes(content)
    bad.chmod(mode)
    before = tree(q)
    r = metaq("submit", str(good), str(bad), "--queue", str(q))
    assert r.returncode == 1
    assert message in r.stderr and r.stderr.count("\n") == 1
    assert tree(q) == before  # all or nothing: not even good.sh was written


LATE = "#!/bin/bash\nset -e\nmodule load qdp\n#METAQ NODES 2\n#METAQ MIN_WC_TIME 4h\n./hmc\n"
"""A METAQ generator's script: METAQ grepped the whole file and ran it on 2 nodes for 4h."""
LATE_SENTENCE = ("late.sh, line 4: this #METAQ line comes after the first command (line 2), "
                 "so it would be ignored; move it above line 2, or write '#METAQ HEADER_ONLY' "
                 "in the header (metaq submit --header-only) if the line belongs to the "
                 "script's body.")


def test_check_leads_with_a_late_directive_and_fails(tmp_path: Path) -> None:
    late = tmp_path / "late.sh"
    late.write_text(LATE)
    late.chmod(0o755)
    r = metaq("check", str(late), "--queue", str(tmp_path / "none"))
    assert r.returncode == 1 and r.stdout == ""  # no "ok", no "nodes 1"
    assert r.stderr == f"metaq: {tmp_path}/{LATE_SENTENCE}\n"
    r = metaq("check", str(late), "--header-only", "--queue", str(tmp_path / "none"))
    assert r.returncode == 0 and "nodes        1\n" in r.stdout and "header_only" in r.stdout


def test_submit_refuses_a_late_directive_unless_told_the_line_is_the_scripts(
        tmp_path: Path) -> None:
    q = tmp_path / "q"
    metaq("init", str(q))
    late = tmp_path / "late.sh"
    late.write_text(LATE)
    late.chmod(0o755)
    before = tree(q)
    r = metaq("submit", str(late), "--queue", str(q))
    assert r.returncode == 1 and r.stderr == f"metaq: {tmp_path}/{LATE_SENTENCE}\n"
    assert tree(q) == before
    r = metaq("submit", str(late), "--header-only", "--queue", str(q))
    assert r.returncode == 0, r.stderr
    queued = q / "todo" / "late.sh"
    assert queued.read_text() == LATE.replace("#!/bin/bash\n", "#!/bin/bash\n#METAQ HEADER_ONLY\n")
    # the mark travels with the file: a plain check (and a runner's scan) accept it as it is
    r = metaq("check", str(queued), "--queue", str(q))
    assert r.returncode == 0 and "nodes        1\n" in r.stdout
    # an array's index files say it too, and a script already marked is not marked twice
    marked = tmp_path / "marked.sh"
    marked.write_text(queued.read_text())
    marked.chmod(0o755)
    r = metaq("submit", str(marked), "--header-only", "--array", "0-1", "--again",
              "--queue", str(q))
    assert r.returncode == 0, r.stderr
    assert (q / "todo/marked.sh/.script").read_text() == queued.read_text()
    assert "#METAQ HEADER_ONLY\n" in (q / "todo/marked.sh/1").read_text()
    assert metaq("check", str(q / "todo/marked.sh/1"), "--queue", str(q)).returncode == 0


def test_check_reports_errors(tmp_path: Path) -> None:
    bad = script(tmp_path / "bad.sh", "#METAQ TYPE elastic\n")
    r = metaq("check", str(bad), "--json", "--queue", str(tmp_path / "none"))
    assert r.returncode == 1
    [item] = json.loads(r.stdout)
    assert item["ok"] is False and "use rigid, malleable or ondemand" in item["error"]


def test_check_prints_each_shape_of_a_task(tmp_path: Path) -> None:
    shaped = script(tmp_path / "shaped.sh", "#METAQ NODES 4\n#METAQ MIN_WC_TIME 2h\n"
                    "#METAQ SHAPE NODES 8 MIN_WC_TIME 1h\n#METAQ SHAPE CPUS 8 GPUS 1\n")
    r = metaq("check", str(shaped), "--queue", str(tmp_path / "none"))
    assert r.returncode == 0, r.stderr
    assert "shape 1      8 nodes, 0 GPUs, for 01:00:00" in r.stdout
    assert "shape 2      8 cores of one node, 1 GPU, for 02:00:00" in r.stdout
    r = metaq("check", str(shaped), "--json", "--queue", str(tmp_path / "none"))
    [item] = json.loads(r.stdout)
    assert [s["nodes"] for s in item["spec"]["shapes"]] == [8, 1]


def test_bad_config_is_reported_with_key_and_line(tmp_path: Path) -> None:
    q = tmp_path / "q"
    metaq("init", str(q))
    (q / "metaq.yaml").write_text("folders: [todo]\ncaps:\n  nodes: many\n")
    r = metaq("status", "--queue", str(q))
    assert r.returncode == 1
    assert r.stderr.strip() == (f"metaq: {q / 'metaq.yaml'}, line 3: setting 'caps.nodes' "
                                f"must be a whole number, not 'many'.")


def test_status_on_a_scratch_copy_shows_every_state(tmp_path: Path) -> None:
    scratch = tmp_path / "queue"
    shutil.copytree(EXAMPLES, scratch, symlinks=True)
    from metaq_py.queue.store import Queue

    q = Queue(scratch)
    tasks = q.pending()
    claim = q.claim(tasks[0], machine="local", jobid="1")
    q.finish(q.claim(tasks[1], machine="local", jobid="1"), exit_code=0)
    q.finish(q.claim(tasks[2], machine="local", jobid="1"), exit_code=2)
    data = json.loads(metaq("status", "--json", "--queue", str(scratch)).stdout)
    assert data["totals"] == {"pending": len(tasks) - 3, "hold": 0, "working": 1,
                              "finished": 1, "failed": 1, "rejected": 0, "cancelled": 0}
    working = json.loads(metaq("ls", "working", "--json", "--queue", str(scratch)).stdout)
    assert working[0]["task"] == claim.id and working[0]["job"] == "1"


def test_running_gives_the_heartbeat_age_with_its_unit(tmp_path: Path) -> None:
    from metaq_py.queue.store import Queue

    q = Queue.init(tmp_path / "q")
    script(q.root / "todo" / "t.sh")
    claim = q.claim(q.pending()[0], machine="m", jobid="7")
    assert claim is not None
    r = metaq("running", "--batch", "local", "--machine", "m", "--queue", str(q.root))
    assert r.returncode == 0, r.stderr
    [line] = r.stdout.splitlines()
    age = line.split("heartbeat ", 1)[1].split(" ago", 1)[0]
    number, unit = age.split()
    assert unit == "s" and 0.0 <= float(number) < 60 and "." in number, line


def test_an_array_grows_by_new_indices_but_the_same_ones_are_twins(tmp_path: Path) -> None:
    """A week of new configurations is more work (issue 34); the same indices of the same
    script again, or the script alone, are a generator run twice (issue 31)."""
    q = tmp_path / "q"
    assert metaq("init", str(q)).returncode == 0
    prop = script(tmp_path / "prop.sh")
    assert metaq("submit", "--array", "0-3", str(prop), "--queue", str(q)).returncode == 0
    grown = metaq("submit", "--array", "4-7", "--folder", "week2", str(prop), "--queue", str(q))
    assert grown.returncode == 0, grown.stderr
    for again in (["--array", "2-3", "--folder", "week3"], ["--folder", "week3"]):
        r = metaq("submit", *again, str(prop), "--queue", str(q))
        if again[0] == "--array":
            assert r.returncode == 1 and "with the same content, at todo/prop.sh" in r.stderr
        else:  # one task, not an index: other work than the array's
            assert r.returncode == 0, r.stderr

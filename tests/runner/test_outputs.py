"""The look at a task's outputs (``CREATES``): globs as fnmatch reads them, listings kept
while a folder is unchanged, what never counts as an output."""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metaq_py.directives import parse_header
from metaq_py.runner.tasks.outputs import MAX_MATCHES, Outputs, _matcher

names = st.text(alphabet="ab*_.", max_size=8)


@given(pattern=names, name=st.text(alphabet="ab_.", max_size=10))
def test_the_star_matcher_agrees_with_fnmatch(pattern: str, name: str) -> None:
    assert _matcher(pattern)(name) == fnmatch.fnmatchcase(name, pattern)


@given(pattern=st.text(alphabet="ab?[]*!", max_size=6), name=st.text(alphabet="ab", max_size=6))
def test_other_wildcards_are_fnmatchs(pattern: str, name: str) -> None:
    assert _matcher(pattern)(name) == fnmatch.fnmatchcase(name, pattern)


def _spec(*creates: str):
    lines = "".join(f"#METAQ CREATES {c}\n" for c in creates)
    return parse_header(f"#!/bin/bash\n{lines}true\n".encode(), path="t.sh")


def test_a_new_file_is_seen_once_its_folder_changes(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    outputs = Outputs(tmp_path)
    spec = _spec("out/r_*.h5")
    assert outputs.look(spec).missing == str(tmp_path / "out/r_*.h5")
    (tmp_path / "out/r_1.h5").write_text("x")
    os.utime(tmp_path / "out", ns=(1, 10**18))  # a changed folder, whatever the clock
    assert outputs.look(spec).done


def test_a_glob_matching_too_many_names_is_said(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    for i in range(MAX_MATCHES + 1):
        (out / f"r_{i}.h5").touch()  # empty: none is an output, all are matches
    look = Outputs(tmp_path).look(_spec("out/r_*.h5"))
    assert not look.done and look.problem is not None
    assert look.problem.startswith("line 2: CREATES out/r_*.h5: the glob matches more than")


def test_an_unreadable_folder_is_said(tmp_path: Path) -> None:
    import pwd
    import subprocess
    import sys
    if os.geteuid() != 0:
        pytest.skip("runs the look as a second uid, which needs root (CI runs as root)")
    out = tmp_path / "out"
    out.mkdir(mode=0o700)
    (out / "r_1.h5").write_text("x")
    tmp_path.chmod(0o755)
    code = ("import sys; from pathlib import Path; from metaq_py.directives import "
            "parse_header; from metaq_py.runner.tasks.outputs import Outputs; "
            "s = parse_header(b'#!/bin/bash\\n#METAQ CREATES out/r_*.h5\\ntrue\\n', path='t'); "
            "print(Outputs(Path(sys.argv[1])).look(s).problem)")
    user = "nobody"
    pwd.getpwnam(user)
    r = subprocess.run(["runuser", "-u", user, "--", sys.executable, "-c", code, str(tmp_path)],
                       capture_output=True, text=True, env={**os.environ, "HOME": "/"})
    assert "line 2: CREATES out/r_*.h5: the runner may not read its folder" in r.stdout, \
        r.stderr

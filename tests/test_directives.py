"""#METAQ parsing: METAQ compatibility, extensions, every bad input, properties."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metaq_py.directive_keys import MAX_SIGNAL_LEAD, parse_array, parse_indices
from metaq_py.directives import (
    HEADER_LIMIT,
    format_directives,
    parse_header,
    read_task,
)
from metaq_py.errors import TaskError
from metaq_py.policy.model import Kind
from metaq_py.ranges import format_indices
from metaq_py.task_spec import Checkpoint, Resize, Signal, TaskShape, TaskSpec


def parse(text: str) -> TaskSpec:
    return parse_header(text.encode(), path="t.sh")


def error(text: str | bytes, **kw: bool) -> TaskError:
    data = text.encode() if isinstance(text, str) else text
    with pytest.raises(TaskError) as info:
        parse_header(data, path="dir/t.sh", **kw)
    return info.value


def test_a_metaq_script_works_unchanged() -> None:
    spec = parse(
        "#!/bin/bash\n"
        "#METAQ NODES 2\n"
        "#METAQ GPUS 4\n"
        "#METAQ MIN_WC_TIME 1:30:00\n"
        "#METAQ PROJECT lqcd\n"
        "#METAQ LOG /scratch/logs/run7.log\n"
        "#METAQ MACHINE titan\n"
        "\n"
        "aprun -n 32 ./hmc\n"
    )
    assert (spec.nodes, spec.min_nodes, spec.gpus) == (2, 2, 4)
    assert spec.min_wc_time == 5400.0
    assert (spec.project, spec.log, spec.machine) == ("lqcd", "/scratch/logs/run7.log", "titan")
    assert spec.type is Kind.RIGID
    assert spec.line_of("GPUS") == 3


def test_extensions() -> None:
    spec = parse(
        "#!/bin/sh\n"
        "# comments and blank lines may be mixed in\n"
        "\n"
        "#METAQ TYPE malleable\n"
        "#METAQ NODES 8\n"
        "#METAQ MIN_NODES 2   # trailing comment\n"
        "#METAQ PRIORITY -3\n"
        "#METAQ SETUP 5m\n"
        "#METAQ CHECKPOINT 1h 2m\n"
        "#METAQ SIGNAL SIGUSR1@30\n"
        "#METAQ RETRIES 2\n"
        "#METAQ RESIZE in-place HUP\n"
        "run\n"
    )
    assert spec.type is Kind.MALLEABLE and (spec.nodes, spec.min_nodes) == (8, 2)
    assert spec.priority == -3 and spec.setup == 300.0
    assert spec.checkpoint == Checkpoint(interval=3600.0, cost=120.0)
    assert spec.signal == Signal(name="USR1", before=30.0)
    assert spec.retries == 2
    assert spec.resize == Resize(mode="in-place", signal="HUP")


def test_defaults_and_small_forms() -> None:
    spec = parse("#!/bin/sh\n#METAQ TYPE malleable\n#METAQ RESIZE in-place\n"
                 "#METAQ SIGNAL USR2\n")
    assert spec.min_nodes == 1 and spec.nodes == 1
    assert spec.resize == Resize(mode="in-place", signal="USR2")
    assert spec.signal == Signal(name="USR2", before=60.0)
    ondemand = parse("#!/bin/sh\n#METAQ TYPE ondemand\n#METAQ NOTICE storm-7\n")
    assert ondemand.type is Kind.ONDEMAND and ondemand.notice == "storm-7"


def test_a_directive_after_the_first_command_is_refused_naming_both_lines() -> None:
    # METAQ grepped the whole file: this script asked it for 2 nodes.
    e = error("#!/bin/bash\nset -e\n\nmodule load qdp\n#METAQ NODES 2\n./hmc\n")
    assert (e.path, e.line) == ("dir/t.sh", 5)
    assert str(e) == ("dir/t.sh, line 5: this #METAQ line comes after the first command "
                      "(line 2), so it would be ignored; move it above line 2, or write "
                      "'#METAQ HEADER_ONLY' in the header (metaq submit --header-only) if "
                      "the line belongs to the script's body.")
    # the first late line is named, indented ones too (a heredoc's body)
    assert error("#!/bin/sh\n#METAQ NODES 2\necho\n  #METAQ GPUS 1\n#METAQ NODES 5\n"
                 ).line == 4


def test_header_only_takes_late_metaq_lines_as_the_scripts_own() -> None:
    text = ("#!/bin/sh\n#METAQ NODES 2\n#METAQ HEADER_ONLY\ncat > next.sh <<EOF\n"
            "#!/bin/sh\n#METAQ NODES 8\nEOF\n")
    spec = parse(text)
    assert (spec.nodes, spec.header_only, spec.line_of("HEADER_ONLY")) == (2, True, 3)
    told = parse_header(text.replace("#METAQ HEADER_ONLY\n", "").encode(), path="t.sh",
                        header_only=True)
    assert (told.nodes, told.header_only) == (2, True)
    assert error("#!/bin/sh\n#METAQ HEADER_ONLY yes\n").message == "HEADER_ONLY takes no value"


def test_only_whole_directive_lines_below_the_header_are_refused() -> None:
    # a comment that merely starts like one, text around one, and no command at all
    for body in ("#METAQ_STEP 3\n", "echo '#METAQ NODES 4'\n", "# #METAQ NODES 4\n"):
        assert parse(f"#!/bin/sh\n#METAQ NODES 2\necho\n{body}").nodes == 2
    assert parse("#!/bin/sh\n#METAQ NODES 2\n").nodes == 2
    # the cut-off last piece of a header read in part is not a whole line
    head = b"#!/bin/sh\n#METAQ NODES 2\necho\n#METAQ NO"
    assert parse_header(head, path="t.sh", truncated=True).nodes == 2
    assert error(head + b"DES 3\nx", truncated=True).line == 4


_BODY = st.lists(st.sampled_from(["echo hi", "", "# a comment", "#METAQ NODES 3",
                                  "\t#METAQ GPUS 1", "#METAQX", "x=1 #METAQ NODES 2"]),
                 max_size=8)


@given(before=_BODY, after=_BODY)
@settings(max_examples=200, deadline=None)
def test_a_late_directive_is_refused_exactly_where_one_is(before: list[str],
                                                          after: list[str]) -> None:
    """Below the first command, a line that would be a directive in the header is refused,
    on its own line; any other text is the script's."""
    lines = ["#!/bin/sh", "#METAQ PROJECT p", "run", *before, *after]
    late = [n for n, line in enumerate(lines, start=1)
            if n > 3 and line.strip().startswith("#METAQ") and line.strip()[6:7] in (" ", "\t")]
    data = "\n".join(lines) + "\n"
    if late:
        assert error(data).line == late[0]
        assert parse_header(data.encode(), path="t", header_only=True).project == "p"
    else:
        assert parse(data).project == "p"


def test_octal_looking_time_is_decimal() -> None:
    assert parse("#!/bin/sh\n#METAQ MIN_WC_TIME 00:08:09\n").min_wc_time == 489.0


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("#!/bin/sh\n#METAQ NODES 2\n#METAQ NODES 3\n", 3, "given again (first on line 2)"),
        ("#!/bin/sh\n#METAQ NODE 2\n", 2, "did you mean NODES"),
        ("#!/bin/sh\n#METAQ nodes 2\n", 2, "not a known #METAQ key"),
        ("#!/bin/sh\n#METAQ NODES two\n", 2, "whole number, not 'two'"),
        ("#!/bin/sh\n#METAQ NODES 0\n", 2, "at least 1"),
        ("#!/bin/sh\n#METAQ NODES -2\n", 2, "at least 1"),
        ("#!/bin/sh\n#METAQ GPUS 1.5\n", 2, "whole number"),
        ("#!/bin/sh\n#METAQ NODES 2 3\n", 2, "one value"),
        ("#!/bin/sh\n#METAQ TYPE malleable\n#METAQ NODES 2\n#METAQ MIN_NODES 3\n", 4,
         "more than NODES 2"),
        ("#!/bin/sh\n#METAQ MIN_NODES 1\n", 2, "only to malleable"),
        ("#!/bin/sh\n#METAQ TYPE elastic\n", 2, "use rigid, malleable or ondemand"),
        ("#!/bin/sh\n#METAQ NOTICE x\n", 2, "only to ondemand"),
        ("#!/bin/sh\n#METAQ MIN_WC_TIME 08:60\n", 2, "below 60"),
        ("#!/bin/sh\n#METAQ MIN_WC_TIME 0\n", 2, "more than zero"),
        ("#!/bin/sh\n#METAQ CHECKPOINT 1h\n", 2, "two durations"),
        ("#!/bin/sh\n#METAQ SIGNAL KILL@5\n", 2, "cannot catch"),
        ("#!/bin/sh\n#METAQ SIGNAL WHISTLE\n", 2, "unknown signal"),
        ("#!/bin/sh\n#METAQ TYPE malleable\n#METAQ RESIZE sideways\n", 3, "in-place or restart"),
        ("#!/bin/sh\n#METAQ TYPE malleable\n#METAQ RESIZE restart USR1\n", 3, "no signal"),
        ("#!/bin/sh\n#METAQ LOG $HOME/x.log\n", 2, "never expanded by a shell"),
        ("#!/bin/sh\n#METAQ LOG `rm -rf /`\n", 2, "never expanded by a shell"),
        ("#!/bin/sh\n#METAQ PROJECT a\x1b[31m\n", 2, "control character"),
        ("#!/bin/sh\n#METAQ\n", 2, "no key"),
        ("#!/bin/sh\n#METAQNODES 2\n", 2, "not a directive"),
        ("#!/bin/sh\n#METAQ PRIORITY\n", 2, "got nothing"),
    ],
)
def test_bad_directives_name_file_line_and_problem(text: str, line: int, words: str) -> None:
    e = error(text)
    assert e.line == line
    assert words in str(e)
    assert str(e).startswith(f"dir/t.sh, line {line}: ")
    assert str(e).endswith((".", "?")) and "\n" not in str(e)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"", "empty"),
        (b"#!/bin/sh\n\x00\x01\x02", "binary"),
        (b"\x7fELF\x02\x01\x01\x00", "binary"),
        (b"echo no shebang\n", "shebang"),
        (b"#!/bin/sh\r\necho hi\r\n", "CRLF"),
        (b"#!/bin/sh\n#METAQ PROJECT caf\xe9\n", "not UTF-8"),
    ],
)
def test_bad_files(data: bytes, words: str) -> None:
    assert words in str(error(data))


def test_a_header_that_never_ends() -> None:
    data = b"#!/bin/sh\n" + b"# padding\n" * (HEADER_LIMIT // 10)
    e = error(data[:HEADER_LIMIT], truncated=True)
    assert "64 KiB" in str(e)
    # The same comments followed by a command within the limit are fine.
    assert parse_header(b"#!/bin/sh\n# x\n" * 10 + b"true\n", path="t").nodes == 1


# --- files ---------------------------------------------------------------------------------


def script(path: Path, text: str, mode: int = 0o755) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def test_read_task_checks_the_file(tmp_path: Path) -> None:
    ok = script(tmp_path / "ok.sh", "#!/bin/sh\n#METAQ NODES 3\ntrue\n")
    assert read_task(ok).nodes == 3
    assert read_task(ok).path == str(ok)
    plain = script(tmp_path / "plain.sh", "#!/bin/sh\ntrue\n", mode=0o644)
    with pytest.raises(TaskError, match="not executable; run chmod"):
        read_task(plain)
    with pytest.raises(TaskError, match="does not exist"):
        read_task(tmp_path / "gone.sh")
    with pytest.raises(TaskError, match="folder"):
        read_task(tmp_path)


def test_symlinks(tmp_path: Path) -> None:
    target = script(tmp_path / "real.sh", "#!/bin/sh\n#METAQ NODES 2\ntrue\n")
    link = tmp_path / "link.sh"
    link.symlink_to(target)
    assert read_task(link).nodes == 2
    a, b = tmp_path / "a", tmp_path / "b"
    a.symlink_to(b)
    b.symlink_to(a)
    with pytest.raises(TaskError, match="symlink loop"):
        read_task(a)
    dangling = tmp_path / "dangling.sh"
    dangling.symlink_to(tmp_path / "nowhere.sh")
    with pytest.raises(TaskError, match="points to a file that does not exist"):
        read_task(dangling)


def test_fifo_is_not_a_task(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(TaskError, match="not a regular file"):
        read_task(fifo)


def test_long_file_with_short_header(tmp_path: Path) -> None:
    body = "#!/bin/sh\n#METAQ NODES 4\n" + "echo x\n" * (HEADER_LIMIT // 4)
    assert read_task(script(tmp_path / "big.sh", body)).nodes == 4
    never = "#!/bin/sh\n" + "#\n" * HEADER_LIMIT
    with pytest.raises(TaskError, match="64 KiB"):
        read_task(script(tmp_path / "never.sh", never))


# --- properties ----------------------------------------------------------------------------


@settings(max_examples=300)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_give_a_spec_or_task_error(data: bytes) -> None:
    try:
        spec = parse_header(data, path="x")
    except TaskError as e:
        assert str(e).startswith("x")
    else:
        assert isinstance(spec, TaskSpec)


_line = st.sampled_from(["#METAQ NODES 2", "#METAQ TYPE malleable", "#METAQ MIN_NODES 1",
                         "#METAQ GPUS 08", "# comment", "", "#METAQ SIGNAL USR1@1:00",
                         "#METAQ CHECKPOINT 1h 1m", "#METAQ NOTICE n", "#METAQ TYPE ondemand",
                         "#METAQ RESIZE restart", "echo", "#METAQ LOG /a b"])


@settings(max_examples=300)
@given(st.lists(st.one_of(_line, st.text(max_size=30)), max_size=12))
def test_near_valid_headers_give_a_spec_or_task_error(lines: list[str]) -> None:
    data = ("#!/bin/sh\n" + "\n".join(lines)).encode()
    try:
        spec = parse_header(data, path="x")
    except TaskError as e:
        assert e.path == "x"
    else:
        assert spec.nodes >= spec.min_nodes >= 1


_word = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zs", "Zl", "Zp")),
    min_size=1, max_size=12,
).filter(lambda w: w.split() == [w] and not w.startswith("#"))
_dur = st.one_of(st.integers(0, 10**7).map(float),
                 st.floats(0, 1e6, allow_nan=False).map(lambda x: round(x, 3)))
_pos = _dur.filter(lambda x: x > 0)
_signal = st.sampled_from(["USR1", "USR2", "TERM", "HUP", "INT"])
_lead = st.one_of(st.integers(0, int(MAX_SIGNAL_LEAD)).map(float),
                  st.floats(0, MAX_SIGNAL_LEAD, allow_nan=False).map(lambda x: round(x, 3)))


@st.composite
def specs(draw: st.DrawFn) -> TaskSpec:
    kind = draw(st.sampled_from(list(Kind)))
    nodes = draw(st.integers(1, 5000))
    resize = None
    if kind is Kind.MALLEABLE and draw(st.booleans()):
        mode = draw(st.sampled_from(["in-place", "restart"]))
        resize = Resize(mode=mode, signal=draw(_signal) if mode == "in-place" else None)
    spec = TaskSpec(
        path="t.sh",
        nodes=nodes,
        min_nodes=draw(st.integers(1, nodes)) if kind is Kind.MALLEABLE else 0,
        gpus=draw(st.integers(0, 64)),
        min_wc_time=draw(st.none() | _pos),
        project=draw(st.none() | _word),
        log=draw(st.none() | _word.filter(lambda w: not set(w) & set("$`~"))),
        machine=draw(st.none() | _word),
        type=kind,
        priority=draw(st.integers(-100, 100)),
        setup=draw(_dur),
        checkpoint=draw(st.none() | st.builds(Checkpoint, interval=_pos, cost=_dur)),
        signal=draw(st.none() | st.builds(Signal, name=_signal, before=_lead)),
        notice=draw(_word) if kind is Kind.ONDEMAND and draw(st.booleans()) else None,
        retries=draw(st.none() | st.integers(0, 20)),
        resize=resize,
        shapes=draw(_shapes()) if kind is Kind.RIGID else (),
        header_only=draw(st.booleans()),
    )
    # a shape equal to the header's own is refused (tested below), so none is drawn
    return replace(spec, shapes=tuple(s for s in spec.shapes if s != spec.shape))


@st.composite
def _shapes(draw: st.DrawFn) -> tuple[TaskShape, ...]:
    """Distinct shapes of every kind: whole nodes, a share by cores, METAQ's GPU-only."""
    out: list[TaskShape] = []
    for _ in range(draw(st.integers(0, 3))):
        size = draw(st.sampled_from(["whole", "cpus", "gpu-only"]))
        gpus = draw(st.integers(1 if size == "gpu-only" else 0, 8))
        shape = TaskShape(nodes=draw(st.integers(1, 64)) if size == "whole" else 1, gpus=gpus,
                          cpus=draw(st.integers(1, 128)) if size == "cpus" else 0,
                          min_wc_time=draw(_pos), gpu_share=size == "gpu-only")
        if shape not in out:
            out.append(shape)
    return tuple(out)


@settings(max_examples=300)
@given(specs())
def test_format_then_parse_gives_the_same_spec(spec: TaskSpec) -> None:
    text = "#!/bin/bash\n" + format_directives(spec) + "exec ./work\n"
    assert parse_header(text.encode(), path="t.sh") == spec


# --- shapes (issue 18) --------------------------------------------------------------------


def test_a_shape_line_fills_in_what_it_leaves_out_from_the_header() -> None:
    spec = parse_header(b"#!/bin/bash\n#METAQ NODES 4\n#METAQ GPUS 16\n#METAQ MIN_WC_TIME 2h\n"
                        b"#METAQ SHAPE NODES 8 MIN_WC_TIME 1h\n#METAQ SHAPE MIN_WC_TIME 3h\n"
                        b"#METAQ SHAPE CPUS 8 GPUS 1\n#METAQ SHAPE NODES 0 GPUS 2\nrun\n",
                        path="t.sh")
    assert spec.shapes == (
        TaskShape(nodes=8, gpus=16, cpus=0, min_wc_time=3600.0),
        TaskShape(nodes=4, gpus=16, cpus=0, min_wc_time=3 * 3600.0),
        TaskShape(nodes=1, gpus=1, cpus=8, min_wc_time=7200.0),
        TaskShape(nodes=1, gpus=2, cpus=0, min_wc_time=7200.0, gpu_share=True),
    )
    assert spec.in_shape(0) == replace(spec, shapes=())
    one = spec.in_shape(1)
    assert (one.nodes, one.min_nodes, one.gpus, one.min_wc_time, one.shapes) == \
        (8, 8, 16, 3600.0, ())
    share = spec.in_shape(3)
    assert (share.nodes, share.cpus, share.gpus, share.gpu_share) == (1, 8, 1, False)
    assert spec.in_shape(4).gpu_share


@pytest.mark.parametrize(("lines", "line", "words"), [
    ("#METAQ SHAPE NODES", 2, "pairs of a key and a value"),
    ("#METAQ SHAPE PROJECT x", 2, "cannot set 'PROJECT'"),
    ("#METAQ SHAPE NODES 2 NODES 3", 2, "sets NODES twice"),
    ("#METAQ SHAPE NODES 1", 2, "the same as the header's own"),
    ("#METAQ SHAPE NODES 2\n#METAQ SHAPE NODES 2", 3, "the same as line 2's"),
    ("#METAQ SHAPE NODES 0", 2, "needs GPUS too"),
    ("#METAQ SHAPE CPUS 4 NODES 2", 2, "share of one node"),
    ("#METAQ EXCLUSIVE\n#METAQ SHAPE CPUS 4", 3, "EXCLUSIVE"),
    ("#METAQ TYPE malleable\n#METAQ SHAPE NODES 2", 3, "only to rigid tasks"),
    ("#METAQ SHAPE NODES 2\n#METAQ TYPE ondemand", 2, "only to rigid tasks"),
    ("#METAQ SHAPE MIN_WC_TIME soon", 2, "MIN_WC_TIME"),
    ("\n".join(f"#METAQ SHAPE NODES {n}" for n in range(2, 19)), 18, "more than 16 times"),
])
def test_a_bad_shape_line_is_named_with_its_line(lines: str, line: int, words: str) -> None:
    with pytest.raises(TaskError) as e:
        parse_header(f"#!/bin/bash\n{lines}\nrun\n".encode(), path="t.sh")
    assert e.value.line == line
    assert words in str(e.value)


# --- bounds (issue 15) ---------------------------------------------------------------------

BOUNDED = [
    ("#METAQ SIGNAL USR1@99999999999999999999", "too large"),
    ("#METAQ SIGNAL USR1@3h", "longer than"),
    ("#METAQ SIGNAL CHLD@60", "not a signal a program catches"),
    ("#METAQ NODES 100000000000000000000000", "at most 1000000"),
    ("#METAQ PRIORITY -99999999", "at most 1000000"),
    ("#METAQ RETRIES 1000", "at most 100"),
    ("#METAQ MIN_WC_TIME 400d", "longer than"),
]


@pytest.mark.parametrize(("line", "message"), BOUNDED)
def test_every_user_number_has_an_upper_bound(line: str, message: str) -> None:
    with pytest.raises(TaskError, match=message) as caught:
        parse_header(f"#!/bin/sh\n{line}\necho\n".encode(), path="t.sh")
    assert str(caught.value).startswith("t.sh, line 2: ") and "\n" not in str(caught.value)


def test_lower_case_directives_are_found_for_a_warning() -> None:
    from metaq_py.directives import miscased_directives

    data = b"#!/bin/sh\n#metaq NODES 2\n#METAQ NODES 1\n#Metaq GPUS 1\necho\n#metaq late\n"
    assert miscased_directives(data) == [2, 4]
    assert parse_header(data, path="t.sh").nodes == 1


# --- shares of a node (CPUS, EXCLUSIVE) ----------------------------------------------------


def test_cpus_asks_for_a_share_and_gpus_alone_keeps_whole_nodes() -> None:
    share = parse("#!/bin/bash\n#METAQ GPUS 1\n#METAQ CPUS 8\nrun\n")
    assert (share.nodes, share.cpus, share.gpus, share.exclusive) == (1, 8, 1, False)
    metaq = parse("#!/bin/bash\n#METAQ NODES 2\n#METAQ GPUS 4\nrun\n")
    assert (metaq.nodes, metaq.cpus, metaq.gpus) == (2, 0, 4)
    alone = parse("#!/bin/bash\n#METAQ GPUS 1\nrun\n")
    assert alone.cpus == 0, "GPUS without CPUS keeps its METAQ meaning: whole nodes"
    assert parse("#!/bin/bash\n#METAQ EXCLUSIVE\nrun\n").exclusive


@pytest.mark.parametrize(("header", "line", "words"), [
    ("#METAQ CPUS 0", 2, "at least 1"),
    ("#METAQ CPUS eight", 2, "whole number"),
    ("#METAQ EXCLUSIVE yes", 2, "takes no value"),
    ("#METAQ CPUS 4\n#METAQ NODES 2", 3, "remove NODES or CPUS"),
    ("#METAQ CPUS 4\n#METAQ EXCLUSIVE", 3, "remove EXCLUSIVE or CPUS"),
    ("#METAQ TYPE malleable\n#METAQ CPUS 4", 2, "remove TYPE or CPUS"),
])
def test_bad_shares_are_refused_on_their_line(header: str, line: int, words: str) -> None:
    e = error(f"#!/bin/bash\n{header}\nrun\n")
    assert e.line == line and words in str(e)


@given(st.integers(1, 512), st.integers(0, 8), st.booleans())
def test_shares_round_trip_through_format_directives(cpus: int, gpus: int,
                                                     exclusive: bool) -> None:
    spec = TaskSpec(path="t", gpus=gpus, cpus=0 if exclusive else cpus, exclusive=exclusive)
    again = parse_header(f"#!/bin/sh\n{format_directives(spec)}true\n".encode(), path="t")
    assert again == spec


def test_after_is_repeatable_and_array_takes_an_index_list() -> None:
    spec = parse_header(b"#!/bin/sh\n#METAQ AFTER a.sh b[3]\n#METAQ AFTER todo/c*\n"
                        b"#METAQ AFTER_ANY d.sh\n#METAQ ARRAY 0-9:3,20\ntrue\n", path="t")
    assert spec.after == ("a.sh", "b[3]", "todo/c*") and spec.after_any == ("d.sh",)
    assert spec.array == "0-9:3,20" and parse_indices(spec.array) == (0, 3, 6, 9, 20)
    again = parse_header(f"#!/bin/sh\n{format_directives(spec)}true\n".encode(), path="t")
    assert again == spec


@pytest.mark.parametrize(("line", "problem"), [
    (b"#METAQ ARRAY 9-1", "counts down"),
    (b"#METAQ ARRAY 1-", "not an index list item"),
    (b"#METAQ ARRAY 0-1:0", "steps by 0"),
    (b"#METAQ ARRAY 0-200000", "more than"),
    (b"#METAQ AFTER", "needs the name"),
    (b"#METAQ AFTER ../x.sh", "inside the queue"),
    (b"#METAQ ARRAY 1\n#METAQ ARRAY 2", "given again"),
    (b"#METAQ ARRAY 0-19%0", "after % comes how many"),
    (b"#METAQ ARRAY 0-19%", "after % comes how many"),
    (b"#METAQ ARRAY 0-19%4%2", "after % comes how many"),
    (b"#METAQ ARRAY %4", "not an index list item"),
])
def test_bad_arrays_and_dependencies_name_the_line(line: bytes, problem: str) -> None:
    with pytest.raises(TaskError, match=problem) as e:
        parse_header(b"#!/bin/sh\n" + line + b"\ntrue\n", path="t")
    assert ", line " in str(e.value)


@given(st.text(alphabet="0123456789-,:", max_size=20))
def test_parse_indices_raises_value_error_or_gives_sorted_unique(text: str) -> None:
    try:
        out = parse_indices(text)
    except ValueError:
        return
    assert len(set(out)) == len(out) and all(i >= 0 for i in out)


def test_an_array_throttle_follows_its_indices() -> None:
    spec = parse_header(b"#!/bin/sh\n#METAQ ARRAY 0-19%4\ntrue\n", path="t")
    assert spec.array == "0-19%4" and parse_array(spec.array) == (tuple(range(20)), 4)
    assert parse_array("3,5") == ((3, 5), None)
    again = parse_header(f"#!/bin/sh\n{format_directives(spec)}true\n".encode(), path="t")
    assert again == spec


@given(st.text(alphabet="0123456789-,:%", max_size=24))
def test_parse_array_is_parse_indices_and_a_throttle_of_at_least_one(text: str) -> None:
    try:
        indices, throttle = parse_array(text)
    except ValueError:
        return
    body, pct, limit = text.partition("%")
    assert indices == parse_indices(body)
    assert (throttle is None) == (not pct)
    assert throttle is None or (throttle >= 1 and throttle == int(limit))


@given(st.sets(st.integers(0, 500), min_size=1, max_size=40), st.integers(1, 10**6))
def test_an_index_list_with_a_throttle_reads_back(indices: set[int], limit: int) -> None:
    from metaq_py.ranges import format_indices

    assert parse_array(f"{format_indices(indices)}%{limit}") == (tuple(sorted(indices)), limit)


# --- METAQ's GPU-only task (NODES 0 with GPUS) ---------------------------------------------


def test_nodes_0_with_gpus_is_a_share_of_one_node() -> None:
    spec = parse("#!/bin/bash\n#METAQ NODES 0\n#METAQ GPUS 4\n#METAQ MIN_WC_TIME 2hr\nrun\n")
    assert (spec.nodes, spec.gpus, spec.cpus, spec.gpu_share) == (1, 4, 0, True)
    assert spec.min_wc_time == 7200.0
    # GPUS may come first: METAQ reads the keys in any order.
    assert parse("#!/bin/bash\n#METAQ GPUS 2\n#METAQ NODES 0\nrun\n").gpu_share
    # A missing NODES keeps the default of one whole node, as in METAQ's own examples.
    whole = parse("#!/bin/bash\n#METAQ GPUS 2\nrun\n")
    assert (whole.nodes, whole.gpu_share) == (1, False)


@pytest.mark.parametrize(("header", "line", "words"), [
    ("#METAQ NODES 0", 2, "needs GPUS too"),
    ("#METAQ NODES 0\n#METAQ GPUS 0", 2, "needs GPUS too"),
    ("#METAQ NODES 0\n#METAQ GPUS 1\n#METAQ EXCLUSIVE", 4, "remove EXCLUSIVE or write NODES 1"),
    ("#METAQ NODES 0\n#METAQ GPUS 1\n#METAQ TYPE ondemand", 4, "remove TYPE"),
    ("#METAQ NODES 0\n#METAQ GPUS 1\n#METAQ CPUS 2", 2, "remove NODES or CPUS"),
])
def test_bad_gpu_only_tasks_are_refused_on_their_line(header: str, line: int,
                                                      words: str) -> None:
    e = error(f"#!/bin/bash\n{header}\nrun\n")
    assert e.line == line and words in str(e)


@given(st.integers(1, 64), st.sampled_from(["5400", "90:00", "1:30:00", "1.5h", "90min"]))
def test_gpu_only_tasks_round_trip_through_format_directives(gpus: int, wc: str) -> None:
    spec = parse(f"#!/bin/sh\n#METAQ NODES 0\n#METAQ GPUS {gpus}\n#METAQ MIN_WC_TIME {wc}\nx\n")
    assert spec.min_wc_time == 5400.0 and spec.gpu_share and spec.gpus == gpus
    again = parse_header(f"#!/bin/sh\n{format_directives(spec)}true\n".encode(), path="t.sh")
    assert again == spec


@given(st.sets(st.integers(min_value=0, max_value=5000), min_size=1, max_size=60))
def test_format_indices_is_read_back_by_parse_indices(values: set[int]) -> None:
    text = format_indices(values)
    assert parse_indices(text) == tuple(sorted(values))
    assert format_indices(parse_indices(text)) == text

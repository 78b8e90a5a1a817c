"""The retry schedule, the exit-code classes and the plan of an end, as properties
(hypothesis), and the new keys' bad input: one sentence naming the line."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metaq_py.directive_keys import BadValue, codes_of, exit_codes, parse_mem
from metaq_py.directives import format_directives, parse_header
from metaq_py.errors import TaskError
from metaq_py.outcomes import (
    FAILED,
    FAILURE,
    FINISHED,
    OOM,
    OUTCOMES,
    REQUEUE,
    REQUEUED,
    RETRY,
    SOFT_FAIL,
    SOFT_FAILED,
    SUCCESS,
    TIMEOUT,
    Policy,
    exit_class,
    plan_end,
    retry_delay,
)
from metaq_py.task_spec import TaskSpec

delays = st.floats(min_value=0.0, max_value=7 * 86400.0, allow_nan=False)
codes = st.integers(min_value=0, max_value=255)
code_sets = st.frozensets(st.integers(min_value=1, max_value=255), max_size=20)


@given(n=st.integers(min_value=1, max_value=200), first=delays, cap=delays)
def test_the_delay_doubles_from_the_first_and_never_passes_the_cap(n: int, first: float,
                                                                  cap: float) -> None:
    d = retry_delay(n, first, cap)
    assert 0.0 <= d <= max(cap, 0.0) or first == 0.0
    assert d <= first * 2.0 ** (n - 1) + 1e-9
    if first > 0 and first * 2.0 ** (n - 1) <= cap:
        assert d == first * 2.0 ** (n - 1)  # exactly doubled until it reaches the cap
    if first > 0 and cap >= first:
        assert retry_delay(n + 1, first, cap) >= d  # never shorter after another failure
    if first > 0 and n > 1 and cap >= first:
        prev = retry_delay(n - 1, first, cap)
        assert d == min(cap, 2 * prev)


@given(first=delays, cap=delays)
def test_no_failure_no_delay(first: float, cap: float) -> None:
    assert retry_delay(0, first, cap) == 0.0
    assert retry_delay(1, 0.0, cap) == 0.0


@given(code=codes, requeue=code_sets, soft=code_sets)
def test_every_code_falls_in_exactly_the_class_its_lists_say(code: int, requeue: frozenset[int],
                                                             soft: frozenset[int]) -> None:
    cls = exit_class(code, requeue_on=requeue, soft_fail_on=soft)
    if code == 0:
        assert cls == SUCCESS
    elif code in requeue:
        assert cls == REQUEUE
    elif code in soft:
        assert cls == SOFT_FAIL
    else:
        assert cls == FAILURE


@given(code=codes, requeue=code_sets, soft=code_sets, timeout_requeues=st.booleans())
def test_a_timeout_is_a_failure_unless_requeue_on_names_it(code: int, requeue: frozenset[int],
                                                          soft: frozenset[int],
                                                          timeout_requeues: bool) -> None:
    cls = exit_class(code, requeue_on=requeue, soft_fail_on=soft, timed_out=True,
                     requeue_timeout=timeout_requeues)
    assert cls == (REQUEUE if timeout_requeues or code in requeue else FAILURE)


@given(st.lists(st.one_of(st.integers(min_value=1, max_value=255),
                          st.tuples(st.integers(1, 255), st.integers(1, 255))),
                min_size=1, max_size=10))
def test_exit_code_lists_read_back_to_the_codes_written(items: list) -> None:
    words, want = [], set()
    for item in items:
        if isinstance(item, tuple):
            a, b = sorted(item)
            words.append(f"{a}-{b}")
            want.update(range(a, b + 1))
        else:
            words.append(str(item))
            want.add(item)
    got = exit_codes("REQUEUE_ON", words, timeout=True)
    assert codes_of(got) == want
    assert exit_codes("REQUEUE_ON", list(got), timeout=True) == got  # normal form is stable


@given(code=st.integers(min_value=1, max_value=255), attempts=st.integers(0, 10),
       requeues=st.integers(0, 30), retries=st.integers(0, 10), timed_out=st.booleans(),
       requeue=code_sets, soft=code_sets)
def test_a_plan_spends_a_retry_only_on_a_failure(code: int, attempts: int, requeues: int,
                                                 retries: int, timed_out: bool,
                                                 requeue: frozenset[int],
                                                 soft: frozenset[int]) -> None:
    spec = TaskSpec(path="t", retries=retries, requeue_on=tuple(map(str, sorted(requeue))),
                    soft_fail_on=tuple(map(str, sorted(soft))), retry_delay=(10.0, 100.0))
    policy = Policy(attempts=1000, requeues=25)
    plan = plan_end(spec, policy, exit_code=code, attempts=attempts, requeues=requeues,
                    what="w", timed_out=timed_out)
    assert plan.outcome in OUTCOMES
    cls = exit_class(code, requeue_on=requeue, soft_fail_on=soft, timed_out=timed_out)
    if cls == REQUEUE:
        assert plan.attempts == attempts  # no retry spent
        assert plan.back == (requeues + 1 < 25)
        assert plan.outcome == (REQUEUED if plan.back else TIMEOUT if timed_out else FAILED)
        if plan.back:
            assert plan.delay == retry_delay(requeues + 1, 10.0, 100.0)
    elif cls == SOFT_FAIL:
        assert (plan.outcome, plan.back, plan.attempts) == (SOFT_FAILED, False, attempts)
    else:
        assert plan.attempts == attempts + 1
        assert plan.back == (attempts + 1 <= retries)
        if plan.back:
            assert plan.outcome == (TIMEOUT if timed_out else RETRY)
            assert plan.delay == retry_delay(attempts + 1, 10.0, 100.0)
        else:
            assert plan.outcome == (TIMEOUT if timed_out else FAILED)


@given(code=st.integers(min_value=1, max_value=255), attempts=st.integers(0, 10),
       retries=st.integers(0, 10), requeue=code_sets, soft=code_sets)
def test_an_oom_kill_is_a_failure_whatever_its_code_and_the_lists(
        code: int, attempts: int, retries: int, requeue: frozenset[int],
        soft: frozenset[int]) -> None:
    spec = TaskSpec(path="t", retries=retries, requeue_on=tuple(map(str, sorted(requeue))),
                    soft_fail_on=tuple(map(str, sorted(soft))), retry_delay=(10.0, 100.0))
    plan = plan_end(spec, Policy(attempts=1000), exit_code=code, attempts=attempts,
                    requeues=0, what="w", oom=True)
    assert plan.outcome == OOM and plan.attempts == attempts + 1  # a retry spent
    assert plan.back == (attempts + 1 <= retries)
    if plan.back:
        assert plan.delay == retry_delay(attempts + 1, 10.0, 100.0)


def test_success_is_finished_whatever_the_lists() -> None:
    spec = TaskSpec(path="t", requeue_on=("1-255",), soft_fail_on=("1-255",))
    plan = plan_end(spec, Policy(), exit_code=0, attempts=3, requeues=0, what="w")
    assert (plan.outcome, plan.back) == (FINISHED, False)


def _header(*lines: str) -> bytes:
    return ("#!/bin/bash\n" + "".join(f"#METAQ {x}\n" for x in lines) + "true\n").encode()


@pytest.mark.parametrize("line, words", [
    ("REQUEUE_ON 256", "outside the exit codes 1-255"),
    ("REQUEUE_ON -1", "not an exit code"),
    ("SOFT_FAIL_ON 0", "0 is success"),
    ("SOFT_FAIL_ON timeout", "not an exit code"),
    ("REQUEUE_ON 90-80", "counts down"),
    ("RETRY_DELAY -5s", "negative"),
    ("RETRY_DELAY 30d", "longer than"),
    ("RETRY_DELAY 1h 1m", "shorter than its first delay"),
    ("RETRY_DELAY 1s 2s 3s", "takes the first delay"),
    ("TIME_LIMIT 0", "more than zero"),
    ("TIME_LIMIT 400d", "longer than"),
    ("MEM 0", "zero"),
    ("MEM 3000P", "more than any node has"),
    ("MEM lots", "not a size"),
    ("MAX_FAILS 0", "at least 1"),
    ("CREATES out/*/x.h5", "wildcard in a folder"),
    ("CREATES out/*", "every file of its folder"),
    ("CREATES out/**.h5", "**"),
    ("CREATES ../x.h5", ".."),
    ("CREATES $HOME/x.h5", "never expanded"),
    ("CREATES out/", "names a folder"),
    ("CREATES out/{i}.h5", "brace"),
])
def test_bad_values_get_one_sentence_naming_the_line(line: str, words: str) -> None:
    with pytest.raises(TaskError) as e:
        parse_header(_header("NODES 1", line), path="t.sh")
    text = str(e.value)
    assert text.startswith("t.sh, line 3: ") and words in text
    assert text.count(". ") == 0 and text.endswith(".")  # one sentence


def test_the_new_keys_round_trip_through_format_directives() -> None:
    spec = parse_header(_header("ARRAY 0-9", "RETRY_DELAY 30s 1h", "REQUEUE_ON 75 timeout",
                                "SOFT_FAIL_ON 3,7-9", "MAX_FAILS 2", "TIME_LIMIT 10m",
                                "MEM 1536M", "CREATES out/c_{index}_*.h5", "CREATES /a/b.dat"),
                        path="t.sh")
    assert spec.requeue_on == ("75", "timeout") and spec.soft_fail_on == ("3", "7-9")
    assert spec.mem == 1536 << 20 and spec.creates == ("out/c_{index}_*.h5", "/a/b.dat")
    again = parse_header(("#!/bin/bash\n" + format_directives(spec) + "true\n").encode(),
                         path="t.sh")
    assert again == spec


@pytest.mark.parametrize("text, size", [("4G", 4 << 30), ("512", 512 << 20),
                                        ("1.5T", int(1.5 * (1 << 40))), ("100KB", 100 << 10),
                                        ("2GiB", 2 << 30)])
def test_mem_reads_as_sbatch_mem(text: str, size: int) -> None:
    assert parse_mem(text) == size


def test_bad_value_is_the_parsers_exception() -> None:
    with pytest.raises(BadValue):
        exit_codes("REQUEUE_ON", [], timeout=True)

"""``metaq show`` for people: local ISO 8601 times and durations in words, never epoch seconds."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from metaq_py.cli.when import in_units, in_words, iso_local
from tests.cli.test_queue import metaq

UNIT = {"day": 86400, "hour": 3600, "minute": 60, "second": 1}


def test_show_prints_local_iso_times_and_durations_in_words(tmp_path: Path) -> None:
    q = tmp_path / "q"
    assert metaq("init", str(q)).returncode == 0
    task = tmp_path / "run.sh"
    task.write_text("#!/bin/sh\n#METAQ MIN_WC_TIME 1:05:00\nexit 3\n")
    task.chmod(0o755)
    assert metaq("submit", str(task), "--queue", str(q)).returncode == 0
    ran = metaq("run", "--queue", str(q), "--batch", "local")
    assert ran.returncode == 0, ran.stderr
    assert metaq("retry", "failed/todo/run.sh", "--queue", str(q)).returncode == 0
    done = metaq("show", "todo/run.sh", "--queue", str(q))
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert not re.search(r"\b1[0-9]{9}(\.[0-9]+)?\b", text), text  # no epoch seconds
    assert "min_wc_time  01:05:00 (1 hour 5 minutes)" in text
    stamps = re.findall(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d", text)
    assert len(stamps) == 4  # submitted, failed, retried, and the failed attempt's start
    for stamp in stamps:
        moment = datetime.fromisoformat(stamp)
        assert moment.utcoffset() == datetime.now().astimezone().utcoffset()
        assert abs(moment.timestamp() - time.time()) < 120
    assert re.search(r"^submitted: \S+ \((less than a second|\d+ seconds?) ago\)$", text, re.M)
    history = text.split("history:\n", 1)[1].split("attempts:\n")[0].splitlines()
    assert [line.split()[1].rstrip(":") for line in history] == ["failed", "retried"]
    assert "exit code 3" in history[0]
    assert all(line.endswith("after submission)") for line in history)
    # Machines keep their numbers.
    data = json.loads(metaq("show", "todo/run.sh", "--json", "--queue", str(q)).stdout)
    assert isinstance(data["submitted"], float)
    assert [h["event"] for h in data["history"]] == ["failed", "retried"]


def test_iso_local_reads_back_as_the_same_second() -> None:
    now = time.time()
    assert datetime.fromisoformat(iso_local(now)).timestamp() == int(now)


@given(st.floats(0.0, 400 * 86400.0, allow_nan=False))
def test_words_say_the_duration_to_their_last_unit(seconds: float) -> None:
    text = in_words(seconds)
    if text == "less than a second":
        assert round(seconds) == 0
        return
    words = text.split()
    assert len(words) in (2, 4)
    pairs = [(int(words[i]), words[i + 1]) for i in range(0, len(words), 2)]
    total = sum(n * UNIT[u.rstrip("s")] for n, u in pairs)
    last = UNIT[pairs[-1][1].rstrip("s")]
    assert 0 <= round(seconds) - total < last
    assert all((n == 1) == (not u.endswith("s")) for n, u in pairs)


def test_words_read_naturally() -> None:
    assert in_words(3900) == "1 hour 5 minutes"
    assert in_words(3605) == "1 hour"
    assert in_words(2 * 86400 + 7200) == "2 days 2 hours"
    assert in_words(40.4) == "40 seconds"


SHORT = {"s": 1, "min": 60, "h": 3600, "d": 86400}


@given(st.floats(0.0, 400 * 86400.0, allow_nan=False))
@example(0.75)  # printed 0.8: off by half a tenth, which in floats is 0.05000000000000004
def test_units_say_the_duration_to_their_last_unit(seconds: float) -> None:
    words = in_units(seconds).split()
    if seconds < 59.95:
        # Tenths of a second: off by at most half a tenth, give or take the floats' rounding.
        assert words[1] == "s" and abs(float(words[0]) - seconds) <= 0.05 + 1e-9
        return
    pairs = [(int(words[i]), words[i + 1]) for i in range(0, len(words), 2)]
    assert len(pairs) in (1, 2) and all(n > 0 for n, _ in pairs)
    total = sum(n * SHORT[u] for n, u in pairs)
    largest = SHORT[pairs[0][1]]
    assert 0 <= round(seconds) - total < (largest if len(pairs) == 1 else SHORT[pairs[1][1]])


def test_units_read_naturally() -> None:
    assert [in_units(x) for x in (7.94, 200, 3600, 7505, 90000)] == \
        ["7.9 s", "3 min 20 s", "1 h", "2 h 5 min", "1 d 1 h"]

"""metaq.yaml: defaults, the template metaq init writes, and bad settings with key and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from metaq_py.errors import ConfigError
from metaq_py.queue.settings.config import (
    Caps,
    Defaults,
    MpiSettings,
    QueueConfig,
    load_config,
)
from metaq_py.queue.settings.template import TEMPLATE


def write(root: Path, text: str) -> Path:
    (root / "metaq.yaml").write_text(text)
    return root


def test_no_file_gives_defaults_with_the_jobs_log_root(tmp_path: Path) -> None:
    config = load_config(tmp_path)
    assert config.folders == ("priority", "todo")
    assert config.log_roots == (str(tmp_path.absolute() / "jobs"),)
    assert config.defaults == Defaults() and config.caps == Caps()


def test_template_reads_back_as_the_defaults(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, TEMPLATE.format(group="null")))
    assert config == QueueConfig(log_roots=(str(tmp_path.absolute() / "jobs"),))


def test_settings_are_read(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, (
        "folders: [urgent, todo, later]\n"
        "log_roots: [logs, /scratch/proj]\n"
        "defaults:\n  min_wc_time: 1:30:00\n  retries: 2\n"
        "caps:\n  nodes: 128\n  min_wc_time: 08:00:00\n  attempts: 3\n"
        "heartbeat: 1m\nstale_after: 00:09:00\npoll_interval: 2\n"
    )))
    assert config.folders == ("urgent", "todo", "later")
    assert config.log_roots[1:] == (str(tmp_path.absolute() / "logs"), "/scratch/proj")
    assert config.defaults == Defaults(min_wc_time=5400.0, retries=2)
    assert config.caps == Caps(nodes=128, gpus=None, min_wc_time=8 * 3600.0, attempts=3)
    assert (config.heartbeat, config.stale_after, config.poll_interval) == (60.0, 540.0, 2.0)


@pytest.mark.parametrize(("text", "order"), [
    ("order: largest-first\n", "largest-first"),
    ("order: submit\n", "submit"),
    ("folders: [priority, todo]\n", "submit"),  # no order key: today's submit order
])
def test_order_is_read_and_defaults_to_submit(tmp_path: Path, text: str, order: str) -> None:
    assert load_config(write(tmp_path, text)).order == order


def test_the_template_states_the_default_order(tmp_path: Path) -> None:
    assert "\norder: submit\n" in TEMPLATE
    assert load_config(tmp_path).order == "submit"  # no file at all


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("folders: [todo]\nfolder: x\n", 2, "setting 'folder' is unknown"),
        ("folders: todo\n", 1, "must be a list"),
        ("folders: [todo, working]\n", 1, "cannot use 'working'"),
        ("folders: []\n", 1, "at least one"),
        ("caps:\n  nodes: lots\n", 2, "setting 'caps.nodes' must be a whole number"),
        ("caps:\n  gpu: 1\n", 2, "'caps.gpu' is unknown"),
        ("defaults:\n  min_wc_time: 08:60\n", 2, "60 seconds"),
        ("defaults:\n  retries: -1\n", 2, "at least 0"),
        ("heartbeat: 0\n", 1, "more than zero"),
        ("heartbeat: 10m\nstale_after: 5m\n", 2, "longer than heartbeat"),
        ("group: no-such-group-here\n", 1, "not a group"),
        ("trusted_users: [no-such-user-here]\n", 1, "not a user"),
        ("folders: [todo\n", 2, "not valid YAML"),
        ("- a\n- b\n", 1, "mapping"),
        ("folders: [todo]\norder: biggest\n", 2,
         "setting 'order' is 'biggest', which is not a known order; the known orders are "
         "submit and largest-first."),
        ("order: [submit]\n", 1, "setting 'order' must be a single value"),
        ("order:\n", 1, "setting 'order' is empty; the known orders are submit and"),
    ],
)
def test_bad_settings_name_key_and_line(tmp_path: Path, text: str, line: int,
                                        words: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    assert info.value.line == line
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'metaq.yaml'}, line {line}: ")
    assert words in message and "\n" not in message


def test_the_mpi_launcher_and_its_options_are_read(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "mpi:\n  launcher: mpiexec\n  args: [-genv, A=1]\n"))
    assert config.mpi == MpiSettings(launcher="mpiexec", args=("-genv", "A=1"))
    assert load_config(write(tmp_path, "folders: [todo]\n")).mpi == MpiSettings()
    text = "mpi:\n  launcher: mpirun\n  executable: /usr/bin/mpirun.openmpi\n"
    assert load_config(write(tmp_path, text)).mpi == MpiSettings(
        launcher="mpirun", executable="/usr/bin/mpirun.openmpi")


@pytest.mark.parametrize(("text", "says"), [
    ("mpi:\n  launcher: mpich\n",
     "line 2: setting 'mpi.launcher' is 'mpich', which is not a launcher"),
    ("mpi:\n  args: ['--mpi pmi2']\n", "give each word of the options as its own list item"),
    ("mpi:\n  ranks: 4\n", "known mpi settings are launcher, executable and args"),
    ("mpi:\n  launcher: mpirun\n  executable: /opt/open mpi/bin/mpirun\n",
     "line 3: setting 'mpi.executable' is '/opt/open mpi/bin/mpirun'; give the launcher's "
     "program as one word"),
    ("mpi:\n  executable: mpirun.openmpi\n",
     "line 2: setting 'mpi.executable' is set without mpi.launcher; name the kind of launcher"),
])
def test_a_bad_mpi_setting_is_named_with_its_line(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text))
    assert says in str(caught.value)

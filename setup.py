"""Build metaq-py, compiling the simulator's hot path with mypyc when it can.

The modules in ``COMPILED`` are plain typed Python that mypyc turns into C extensions: the
policy core, the Cluster and the simulator's engine, which every simulated event runs through.
Compiled, a simulation runs about 2.5 times as fast; the code and the results are the same
(``tests/test_build.py``).

The build falls back to pure Python, which behaves identically, when:

- ``METAQ_PURE=1`` is set;
- the install is editable (``pip install -e``), since compiled modules placed beside the
  sources would shadow every later edit to them;
- mypyc cannot be imported, rejects the code, or no C compiler works (each extension is
  optional, so a failed compile skips it with a warning).

``python -c "import metaq_py; print(metaq_py.build())"`` says which one runs.
"""

from __future__ import annotations

import os
import sys

from setuptools import setup

COMPILED = [
    "metaq_py/clock.py",
    "metaq_py/cluster.py",
    "metaq_py/holdings.py",
    "metaq_py/policy/__init__.py",
    "metaq_py/policy/arrival.py",
    "metaq_py/policy/availability.py",
    "metaq_py/policy/backfill.py",
    "metaq_py/policy/checkpoint.py",
    "metaq_py/policy/choices.py",
    "metaq_py/policy/completion.py",
    "metaq_py/policy/ending.py",
    "metaq_py/policy/lending.py",
    "metaq_py/policy/model.py",
    "metaq_py/policy/notice.py",
    "metaq_py/policy/order.py",
    "metaq_py/policy/pool.py",
    "metaq_py/policy/shapes.py",
    "metaq_py/policy/shares.py",
    "metaq_py/policy/snapshot.py",
    "metaq_py/policy/spans.py",
    "metaq_py/policy/waitlist.py",
    "metaq_py/policy/work.py",
    "sim/engine/arrivals.py",
    "sim/engine/core.py",
    "sim/engine/ledger.py",
    "sim/engine/samples.py",
    "sim/engine/waiting.py",
]
"""What mypyc compiles. Not among them: ``metaq_py/policy/mechanisms.py``, whose
:class:`Scheduler` a researcher may subclass to try a policy (Python classes cannot derive from
compiled ones)."""


BUILDS = {"bdist_wheel", "build", "build_ext", "install"}
"""The setup commands that build the package. pip also runs this file only to read the
metadata (``egg_info``, ``dist_info``), and for an editable install (``editable_wheel``):
mypyc then has nothing to do, and its analysis alone takes half a minute."""


def ext_modules() -> list:
    if os.environ.get("METAQ_PURE") or not BUILDS.intersection(sys.argv):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        print("metaq-py: mypyc not available, installing pure Python", file=sys.stderr)
        return []
    try:
        extensions = mypycify(COMPILED, opt_level="3")
    except (Exception, SystemExit) as e:  # mypy's errors end in SystemExit
        print(f"metaq-py: mypyc could not compile ({e}); installing pure Python",
              file=sys.stderr)
        return []
    for extension in extensions:
        extension.optional = True  # no working C compiler: skip it, pure Python stays
    return extensions


setup(ext_modules=ext_modules())

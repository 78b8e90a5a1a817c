"""A check every word-valued scheduler switch passes: its default, each of its words, and one
clear sentence for a word it does not know."""

from __future__ import annotations

import re
from enum import Enum

import pytest

from metaq_py.policy import make_scheduler


def check_switch(key: str, choice: type[Enum], policy: str, bad: str) -> None:
    """``make_scheduler(policy)`` has ``key`` at the first member of ``choice``, builds with
    each of its words, and refuses ``bad`` naming the words to choose from."""
    words = [str(c.value) for c in choice]
    assert getattr(make_scheduler(policy), key) is choice(words[0])
    for word in words:
        assert getattr(make_scheduler(policy, **{key: word}), key) is choice(word)
    sentence = f"unknown {key} {bad!r}; choose {' or '.join(words)}"
    with pytest.raises(ValueError, match=f"^{re.escape(sentence)}$"):
        make_scheduler(policy, **{key: bad})

"""The engine's word-valued choices (``--set KEY=WORD``): one way to read a word."""

from __future__ import annotations

from enum import Enum
from typing import TypeVar

_Choice = TypeVar("_Choice", bound=Enum)


def word_of(choice: type[_Choice], key: str, word: str) -> _Choice:
    """The member of ``choice`` named ``word``; ValueError with one sentence, naming ``key``
    and the words to choose from, for any other word."""
    try:
        return choice(word)
    except ValueError:
        raise ValueError(f"unknown {key} {word!r}; choose "
                         f"{' or '.join(str(c.value) for c in choice)}") from None

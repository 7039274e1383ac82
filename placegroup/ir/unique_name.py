"""Fluid-style unique names: ``fc_0``, ``fc_1``, ``fc_0.w_0``, ``fc_0.tmp_0``.

A generator counts per key; ``guard()`` gives a fresh generator so two models built in one
process (a test and its reference) get the same names.
"""
from __future__ import annotations

import collections
import contextlib


class UniqueNameGenerator:
    def __init__(self, prefix: str = "") -> None:
        self.ids: collections.Counter = collections.Counter()
        self.prefix = prefix

    def __call__(self, key: str) -> str:
        n = self.ids[key]
        self.ids[key] += 1
        return f"{self.prefix}{key}_{n}"


_generator = UniqueNameGenerator()


def generate(key: str) -> str:
    """``generate("fc")`` -> ``"fc_0"``, then ``"fc_1"``, ... in this process's generator."""
    return _generator(key)


def generate_with_ignorable_key(key: str) -> str:
    """``generate(key)``: Fluid 1.8 names the temps of a layer this way so that its imperative
    mode may replace the key by ``"tmp"``; in a static program, placegroup's only mode, the key
    is kept."""
    return _generator(key)


def switch(new: UniqueNameGenerator | None = None) -> UniqueNameGenerator:
    global _generator
    old, _generator = _generator, new or UniqueNameGenerator()
    return old


@contextlib.contextmanager
def guard(new: UniqueNameGenerator | str | None = None):
    """Use a fresh name generator inside the block (a str is a prefix for every name)."""
    if isinstance(new, str):
        new = UniqueNameGenerator(new)
    old = switch(new)
    try:
        yield
    finally:
        switch(old)

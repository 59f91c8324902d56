"""Numeric ranges shared by every config (stages, phases, the manifest), checked at load.

Each alias is a pydantic ``Annotated`` type, so a value out of range fails where the manifest is
read, with its ``file:line: field`` (datapipe.manifest.load). ``tests/test_config_ranges.py`` walks
every registered config and fails on a numeric field without one of these (or its own bounds).

* ``Probability``: scores, probabilities and fractions (a share of lines, words or characters), [0, 1].
* ``NonNegInt`` / ``NonNegFloat``: counts, sizes and unbounded ratios, >= 0.
* ``PosInt`` / ``PosFloat``: counts and limits where 0 has no meaning (batch sizes, time-outs), >= 1 / > 0.
* ``Seed``: a random seed, [0, 2**32 - 1] (numpy ``RandomState``'s range, the strictest user).

None of them takes a boolean: ``true``/``false`` where a number belongs is an error, not 1 / 0.
"""
from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, Field


def _not_bool(value):
    # pydantic's lax mode reads ``true`` as 1 / 1.0: in a manifest that is a slip (``min_score: true``), not a number.
    if isinstance(value, bool):
        raise ValueError(f"a number is expected here, not {str(value).lower()}")
    return value


_NUMBER = BeforeValidator(_not_bool)
Probability = Annotated[float, Field(ge=0.0, le=1.0), _NUMBER]
NonNegInt = Annotated[int, Field(ge=0), _NUMBER]
NonNegFloat = Annotated[float, Field(ge=0.0), _NUMBER]
PosInt = Annotated[int, Field(ge=1), _NUMBER]
PosFloat = Annotated[float, Field(gt=0.0), _NUMBER]
Seed = Annotated[int, Field(ge=0, le=2**32 - 1), _NUMBER]


def check_order(model, *pairs: tuple[str, str]):
    """Raise ValueError unless ``model.lo <= model.hi`` for each ``(lo, hi)`` pair of field names
    (a None side is "no bound" and passes). For ``model_validator(mode="after")``; returns ``model``."""
    for lo, hi in pairs:
        a, b = getattr(model, lo), getattr(model, hi)
        if a is not None and b is not None and a > b:
            raise ValueError(f"{lo} ({a:g}) must be <= {hi} ({b:g})")
    return model

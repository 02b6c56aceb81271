"""The value policy of a training metrics row: what ``run.log_metrics`` accepts, and the plain JSON numbers a
row holds once it is queued.

A row is checked whole on the caller's thread, so a value the platform could not store is refused at the call
that logged it (naming the key) instead of costing the batch of rows it would later be uploaded with.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable, Mapping
from typing import Any

STEP_KEY = "step"
# Steps are JSON numbers read back by clients that keep numbers as doubles: only integers below 2**53 are exact.
MAX_STEP = 2**53
# The platform keeps integers as 64-bit values: a larger integer metric is sent as a float of the same magnitude.
_INT64_LIMIT = 2**63

MetricNumber = int | float | None


def metric_row(values: Mapping[str, Any], step: Any = None) -> dict[str, MetricNumber]:
    """``values`` as a row of plain numbers, with ``step`` set unless the row has its own ``"step"``.

    Raises ``TypeError`` for a key that is not a string, a value that is not a number (see :func:`metric_number`)
    or a step that is not an integer, and ``ValueError`` for a step outside ``0 .. 2**53 - 1``.
    """
    if not isinstance(values, Mapping):
        raise TypeError(f"log_metrics() takes a mapping of metric names to numbers, got {type(values).__name__}")
    row: dict[str, MetricNumber] = {}
    for key, value in values.items():
        if not isinstance(key, str):
            raise TypeError(f"metric names must be strings, got {key!r} ({type(key).__name__})")
        row[key] = checked_step(value, f"metrics[{STEP_KEY!r}]") if key == STEP_KEY else metric_number(key, value)
    if step is not None:
        checked = checked_step(step, "step=")
        row.setdefault(STEP_KEY, checked)
    return row


def metric_number(key: str, value: Any) -> MetricNumber:
    """A metric value as a plain ``int`` or ``float``: numpy and other numeric scalars are converted (integers stay
    integers), a bool becomes 1 or 0, NaN/±inf and ``None`` become ``None`` (null). Anything else (a string, a
    list, a mapping, an array of more than one element, an object) raises ``TypeError`` naming ``key``."""
    kind = type(value)
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is int:
        return value if -_INT64_LIMIT <= value < _INT64_LIMIT else _float_of(key, value)
    if value is None:
        return None
    scalar = python_scalar(value)
    if scalar is None:
        raise TypeError(
            f"metric {key!r} is {_describe(value)}; log_metrics() takes numbers only "
            "(ints, floats, bools, numpy scalars or 0-d arrays, None)"
        )
    if isinstance(scalar, bool):
        return int(scalar)
    if isinstance(scalar, int):
        return scalar if -_INT64_LIMIT <= scalar < _INT64_LIMIT else _float_of(key, scalar)
    return scalar if math.isfinite(scalar) else None


def python_scalar(value: Any) -> bool | int | float | None:
    """``value`` as a plain Python ``bool``, ``int`` or ``float`` when it is a numeric scalar (numpy scalars and
    0-d arrays, ``numbers.Real``, objects with ``__float__``), else None. Strings are never numbers here."""
    convert = _NUMBER_TYPES.get(type(value))
    if convert is not None:
        return convert(value)
    if isinstance(value, (str, bytes, bytearray, Mapping)) or getattr(value, "ndim", 0) != 0:
        return None  # an array (or tensor) of values is not one number
    convert = _number_converter(type(value))
    if convert is not None:
        if len(_NUMBER_TYPES) < _NUMBER_TYPES_LIMIT:
            _NUMBER_TYPES[type(value)] = convert
        return convert(value)
    item = getattr(value, "item", None)
    if callable(item) and hasattr(value, "ndim"):
        # numpy bools, 0-d arrays and scalar tensors; a complex or string item is not a number.
        plain = item()
        return plain if isinstance(plain, (bool, int, float)) else None
    if hasattr(type(value), "__float__"):
        try:
            return float(value)
        except (TypeError, ValueError, OverflowError):
            return None
    return None


# How a numeric type becomes a plain number, learnt once per type: the abstract-class checks cost more than the
# conversion, and a training loop logs the same few types at every step.
_NUMBER_TYPES: dict[type, Callable[[Any], bool | int | float]] = {bool: bool, int: int, float: float}
_NUMBER_TYPES_LIMIT = 256


def _number_converter(kind: type) -> Callable[[Any], bool | int | float] | None:
    if issubclass(kind, bool):
        return bool
    if issubclass(kind, numbers.Integral):
        return int
    if issubclass(kind, numbers.Real):
        return float
    return None


def checked_step(step: Any, what: str) -> int:
    """``step`` as an ``int`` in ``0 .. 2**53 - 1`` (numpy integers accepted); a bool, a float, a string or any other
    non-integer raises ``TypeError`` and an integer out of range ``ValueError``, both naming ``what``."""
    if type(step) is int and 0 <= step < MAX_STEP:
        return step
    if isinstance(step, bool) or getattr(getattr(step, "dtype", None), "kind", None) == "b":
        raise TypeError(f"{what} must be a non-negative integer, got the bool {step!r}")
    try:
        number = operator.index(step)
    except TypeError:
        raise TypeError(f"{what} must be a non-negative integer, got {_describe(step)}") from None
    if not 0 <= number < MAX_STEP:
        raise ValueError(f"{what} must be an integer from 0 to 2**53 - 1, got {number}")
    return number


def step_number(step: Any) -> int | None:
    """``step`` when it is a step (:func:`checked_step`'s rule: an ``int`` from 0 to 2**53 - 1, numpy integers
    accepted), else None. The one rule of every step: a metrics row's, an instrument point's ``prime.run.step``
    (in-process and received by the gateway) and a record's dispatch step."""
    if type(step) is int and 0 <= step < MAX_STEP:
        return step
    try:
        return checked_step(step, "step")
    except (TypeError, ValueError):
        return None


def _float_of(key: str, value: int) -> float:
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"metric {key!r} is an integer too large for a float ({value.bit_length()} bits)") from None


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


def point_value(value: int | float) -> int | float | None:
    """A gauge or counter point as its step row keeps it: an integer stays an integer; a non-finite float is left
    out (None). Shared by the run's own collection and the gateway's received points."""
    if type(value) is int:
        return value
    number = float(value)
    return number if math.isfinite(number) else None


def histogram_value(total: float, count: int) -> float | None:
    """A histogram point as its step row keeps it: the mean of what it counted; None when it counted nothing."""
    if not count:
        return None
    mean = float(total) / count
    return mean if math.isfinite(mean) else None

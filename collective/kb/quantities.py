"""Quantities in text: numbers read with their signs, ranges and units, compared by value.

A claim's `0.8mm`, `60 mm/s`, `-80 °C`, `55-60 °C`, `between 4 and 6 hours` or `(203 °F)` is read
as a value or range with a unit, and compared with a chunk's quantities after conversion
(`pint`), so `95 °C` supports `203 °F` and `60 °F` does not support `60 °C`. A unit pint does not
know (`HRC`) is compared by its letters. The width of a stated range supports a claim of that
width (`210-230 °C` states a 20 °C window).

pint does the units; the spans are found by one pattern for a number (sign, decimals, thousands)
and the unit word after it. quantulum3 reads spans too, but took 8 s to load here and read `57-62
HRC` as hour-coulombs.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Quantity",
    "convert",
    "in_base_units",
    "kind_words",
    "kinds_named",
    "quantities",
    "same_quantity",
]

_NUMBER = r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+,\d{1,2}(?![\d,])|\d+)(?:\.\d+)?"
_SIGNED = rf"(?:(?<![\w.)\]])[-−](?=\d))?{_NUMBER}"
_UNIT = (
    r"(?:[°º˚]\s?[CFK](?![A-Za-z])|℃|℉|%|"
    r"[A-Za-zµμΩ]+(?:\^?[0-9²³])?(?:\s?/\s?[A-Za-zµμ]+(?:\^?[0-9²³])?)*)"
)
_QUANTITY = re.compile(
    rf"(?:\bbetween\s+(?P<b_low>{_SIGNED})\s*(?P<b_low_unit>{_UNIT})?\s+and\s+)?"
    rf"(?:(?P<low>{_SIGNED})\s*(?P<low_unit>{_UNIT})?\s*(?:-|–|—|\bto\b)\s*(?=[-−]?\d))?"
    rf"(?P<value>{_SIGNED})(?:\s?(?P<unit>{_UNIT}))?",
    re.IGNORECASE,
)
_NOT_UNITS = frozenset(
    "a an and any are as at be by for from in is it its of on or per so than that the then to "
    "up was were with about around near over under while when where which who also each".split()
)
"""Words a number is often followed by that pint would read as units (`in` inches, `a` year)."""
_SYMBOLS = {"℃": "degC", "℉": "degF", "%": "percent"}
_WORD = re.compile(
    r"(?<![\w.,/-])[\w.,]*[A-Za-z][\w.,]*(?:-[\w.,]+)*|(?<![\w.,-])[\w.,]+(?:-[\w.,]+)+"
)
_GLUED = re.compile(r"(\d+(?:[.,]\d+)?)([A-Za-zµμ]+)")


@dataclass(frozen=True)
class Quantity:
    """A number or a range, with its unit."""

    low: float
    high: float
    unit: str
    """pint's name of the unit (`degree_Celsius`), the letters of one pint does not know
    (`hrc`), or empty for a bare number."""
    start: int
    end: int
    """The span in the text it was read from."""

    @property
    def known_unit(self) -> bool:
        """Whether pint knows the unit (so it converts)."""
        return bool(self.unit) and _registry_unit(self.unit) is not None


@functools.cache
def _registry() -> Any:
    import pint

    return pint.UnitRegistry(cache_folder=":auto:")


@functools.lru_cache(maxsize=1024)
def _registry_unit(name: str) -> Any:
    try:
        return _registry().parse_units(name)
    except Exception:  # noqa: BLE001 - pint raises several kinds for text it cannot read
        return None


def _number(text: str) -> float:
    text = text.replace("−", "-")
    if re.fullmatch(r"-?\d+,\d{1,2}", text):  # a decimal comma: 1,5
        return float(text.replace(",", "."))
    return float(text.replace(",", ""))


@functools.lru_cache(maxsize=4096)
def _unit(word: str | None) -> str | None:
    """Pint's name for a unit word, its letters if pint does not know it, None if not a unit."""
    if not word:
        return ""
    word = word.strip()
    if word.lower() in _NOT_UNITS:
        return None
    spelled = _SYMBOLS.get(word) or re.sub(r"^[°º˚]\s?([CFK])$", r"deg\1", word, flags=re.I)
    spelled = re.sub(r"([A-Za-z])\^?([0-9])", r"\1**\2", spelled).replace("²", "**2")
    spelled = spelled.replace("³", "**3").replace(" ", "")
    if (unit := _registry_unit(spelled)) is not None:
        return str(unit)
    # An all-capitals word after a number is a unit pint lacks (HRC, RPM); other words are not.
    return word.lower() if word.isupper() and len(word) > 1 else None


def _is_name(word: str) -> bool:
    """Whether a word of letters and digits is a name (`PA6`, `6061-T6`, `95A`), not `0.8mm`."""
    if not re.search(r"\d", word) or not re.search(r"[A-Za-z]", word):
        return False
    if (power := re.fullmatch(r"([A-Za-zµμ]+)[23]", word)) and _unit(power.group(1)):
        return False  # a unit to a power: cm3, m2
    glued = _GLUED.fullmatch(word)
    if glued is None:
        return True
    letters = glued.group(2)
    # One capital after digits names a grade (`95A`, `316L`), not amperes or litres.
    return (len(letters) == 1 and letters.isupper()) or not _unit(letters)


def _masked(text: str) -> str:
    """`text` with names that hold digits blanked, so their digits are not read as numbers."""
    return _WORD.sub(lambda m: " " * len(m.group(0)) if _is_name(m.group(0)) else m.group(0), text)


def quantities(text: str) -> tuple[Quantity, ...]:
    """The quantities of `text`, in order (digits inside names such as `PA6` are not numbers)."""
    return _quantities(text)


@functools.lru_cache(maxsize=8192)
def _quantities(text: str) -> tuple[Quantity, ...]:
    out = []
    for m in _QUANTITY.finditer(_masked(text)):
        unit = _unit(m["unit"])
        end = m.end() if unit is not None else m.end("value")
        unit = unit or ""
        value = _number(m["value"])
        first = m["b_low"] or m["low"]
        low = _number(first) if first else value
        first_unit = _unit(m["b_low_unit"] or m["low_unit"])
        if first and first_unit and not unit:
            unit = first_unit
        if low > value:
            low, value = value, low
        out.append(Quantity(low, value, unit, m.start(), end))
    return tuple(out)


def convert(value: float, unit: str, to: str) -> float | None:
    """`value` in `unit` converted to `to` (pint's names), or None where they do not convert."""
    if unit == to:
        return value
    ureg = _registry()
    try:
        return float(ureg.Quantity(value, unit).to(to).magnitude)
    except Exception:  # noqa: BLE001 - different dimensions
        return None


def in_base_units(quantity: Quantity) -> tuple[str, float, float] | None:
    """`quantity`'s dimensionality, and its low and high in base units (°C as kelvin).

    Figures in different units compare so; None for a bare number or a unit pint lacks.
    """
    unit = _registry_unit(quantity.unit) if quantity.unit else None
    if unit is None:
        return None
    ureg = _registry()
    try:
        low, high = (
            ureg.Quantity(v, quantity.unit).to_base_units() for v in (quantity.low, quantity.high)
        )
    except Exception:  # noqa: BLE001 - pint raises several kinds for units it cannot convert
        return None
    return str(unit.dimensionality), float(low.magnitude), float(high.magnitude)


def _close(a: float, b: float, converted: str) -> bool:
    """Whether `a` is `b`, within the rounding of a value `converted` from another unit.

    `converted` is the units' dimensionality (empty: not converted): 95 °C is written "203 °F"
    (within 0.6 degrees), 0.8 mm "0.031 in" (within 2%).
    """
    if not converted:
        return abs(a - b) <= 1e-9 + abs(b) * 1e-9
    floor = 0.6 if converted == "[temperature]" else 0.0
    return abs(a - b) <= max(floor, abs(b) * 0.02)


def same_quantity(claim: Quantity, stated: Quantity) -> bool:
    """Whether `stated` (a chunk's) supports `claim`: the same value or range after conversion.

    A value within a stated range is supported (`about 57 °C` of `55-60 °C`); a range only by
    the same range; a bare number in a claim by the same number with any unit; a number with a
    unit never by a bare one. The width of a stated range supports a claim of that width.
    """
    if claim.unit and not stated.unit:
        return False
    if not claim.unit or claim.unit == stated.unit:
        low, high, converted = claim.low, claim.high, ""
    elif claim.known_unit and stated.known_unit:
        low_c = convert(claim.low, claim.unit, stated.unit)
        high_c = convert(claim.high, claim.unit, stated.unit)
        if low_c is None or high_c is None:
            return False
        low, high = low_c, high_c
        converted = str(_registry_unit(stated.unit).dimensionality)
    else:
        return False
    if _close(low, stated.low, converted) and _close(high, stated.high, converted):
        return True
    if low == high and stated.low - 1e-9 <= low <= stated.high + 1e-9:
        return True
    # the width of a range, in the same unit (temperatures: a difference has no offset)
    width = stated.high - stated.low
    return (
        low == high
        and width > 0
        and (not claim.unit or claim.unit == stated.unit)
        and math.isclose(low, width, rel_tol=1e-9)
    )


_KINDS = {
    "[mass] / [length] ** 3": ("density", "dense", "denser", "densest", "weigh", "weighs",
                               "weight", "heavy", "heavier", "mass"),
    "[temperature]": ("temperature", "temperatures", "hot", "hotter", "heat", "warm", "degrees"),
    "[length]": ("long", "length", "thick", "thickness", "wide", "width", "diameter", "size"),
    "[mass] / [length] / [time] ** 2": ("strength", "strong", "stronger", "stress", "pressure"),
}  # fmt: skip
"""Words that only name what kind of quantity a number is, by the unit's dimensionality."""


def kinds_named(text: str) -> set[str]:
    """The dimensionalities whose kind words `text` uses (`denser` names density's)."""
    words = set(re.findall(r"[a-z]+", text.lower()))
    return {dimension for dimension, names in _KINDS.items() if words & set(names)}


def kind_words(quantity: Quantity) -> tuple[str, ...]:
    """The words that name `quantity`'s kind (`weighs` for kg/m3): no more than its unit says."""
    unit = _registry_unit(quantity.unit) if quantity.unit else None
    if unit is None:
        return ()
    return _KINDS.get(str(unit.dimensionality), ())

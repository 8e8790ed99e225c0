"""Printable names of attribute names and attribute types, for messages."""
from __future__ import annotations

from .._generated.enums import AttributeName, AttributeType


def attr_name(name: int) -> str:
    try:
        return AttributeName(name).name
    except ValueError:
        return f"attribute {name}"


def type_name(t: int) -> str:
    try:
        return AttributeType(t).name
    except ValueError:
        return f"type {t}"

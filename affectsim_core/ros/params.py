"""Node parameters declared once, with a description and the accepted values, and checked at start.

Each node lists its parameters as :class:`Param` entries. :func:`declare_params` declares them with
a ``ParameterDescriptor`` (description, numeric range or accepted values, read-only: none of them
can change while the node runs), checks every value, and raises :class:`InvalidInput` naming the
node, the parameter, the value and what was expected; :func:`~affectsim_core.ros.node_main.run_node`
turns that into a one-line message and exit status 2. A later ``ros2 param set`` is refused by ROS
with "Trying to set a read-only parameter". :func:`parameter_file` renders the defaults of every
node as the YAML parameter file (``config/bench.yaml`` is generated from it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import yaml
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.exceptions import ParameterException
from rclpy.node import Node

from affectsim_core.errors import InvalidInput


@dataclass(frozen=True)
class Param:
    """One parameter: ``default`` fixes its type (bool, int, float, str or list of str); ``bounds`` are
    inclusive limits of a number; ``choices`` the accepted strings (each item of a list) or a function
    giving them (a registry's names); ``check`` a further test with ``expected`` saying what passes."""

    name: str
    default: object
    description: str
    bounds: tuple[float, float] | None = None
    choices: Sequence[str] | Callable[[], Sequence[str]] | None = None
    check: Callable[[object], bool] | None = None
    expected: str = ""

    def accepted(self) -> list[str] | None:
        if self.choices is None:
            return None
        return list(self.choices() if callable(self.choices) else self.choices)

    def expectation(self) -> str:
        """What a valid value is, in words (also the descriptor's ``additional_constraints``)."""
        parts = []
        if self.bounds is not None:
            kind = "an integer" if isinstance(self.default, int) and not isinstance(self.default, bool) else "a number"
            parts.append(f"{kind} in [{self.bounds[0]:g}, {self.bounds[1]:g}]")
        if self.choices is not None:
            each = "items from" if isinstance(self.default, list) else "one of"
            parts.append(f"{each} {', '.join(self.accepted())}")
        if self.expected:
            parts.append(self.expected)
        return "; ".join(parts) or f"a {type(self.default).__name__}"

    def descriptor(self) -> ParameterDescriptor:
        d = ParameterDescriptor(description=self.description, read_only=True,
                                additional_constraints=self.expectation())
        if self.bounds is not None and isinstance(self.default, bool):
            raise TypeError(f"parameter {self.name}: bounds on a bool")
        if self.bounds is not None and isinstance(self.default, int):
            d.integer_range = [IntegerRange(from_value=int(self.bounds[0]), to_value=int(self.bounds[1]), step=1)]
        elif self.bounds is not None:
            d.floating_point_range = [FloatingPointRange(from_value=float(self.bounds[0]),
                                                         to_value=float(self.bounds[1]), step=0.0)]
        return d

    def validate(self, value: object, where: str) -> object:
        """``value`` if it is acceptable, else :class:`InvalidInput`."""
        ok = True
        if self.bounds is not None:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
                and self.bounds[0] <= value <= self.bounds[1]
        if ok and self.choices is not None:
            items = value if isinstance(value, list) else [value]
            ok = all(v in self.accepted() for v in items)
        if ok and self.check is not None:
            ok = bool(self.check(value))
        if not ok:
            raise InvalidInput(f"parameter {self.name}", value, self.expectation(), where=where)
        return value


def declare_params(node: Node, params: Sequence[Param]) -> dict[str, object]:
    """Declare ``params`` on ``node`` (read-only, described, bounded) and return their checked values."""
    where = node.get_name()
    values = {}
    for p in params:
        try:
            node.declare_parameter(p.name, p.default, p.descriptor())
        except ParameterException as exc:  # wrong type or out of the descriptor's range
            given = getattr(node, "_parameter_overrides", {}).get(p.name)
            raise InvalidInput(f"parameter {p.name}", getattr(given, "value", given),
                               f"{p.expectation()} ({exc})", where=where) from None
        values[p.name] = p.validate(node.get_parameter(p.name).value, where)
    return values


def parameter_file(nodes: dict[str, Sequence[Param]], header: str = "") -> str:
    """The YAML parameter file (``node: ros__parameters: name: default``) of ``nodes``, commented."""
    lines = [header.rstrip()] if header else []
    for node, params in nodes.items():
        lines += [f"{node}:", "  ros__parameters:"]
        for p in params:
            value = yaml.safe_dump(p.default, default_flow_style=True, width=1000).strip()
            if value.endswith("\n..."):
                value = value[:-4].strip()
            value = value.removesuffix("...").strip()
            lines.append(f"    {p.name}: {value}  # {p.description}")
    return "\n".join(lines) + "\n"

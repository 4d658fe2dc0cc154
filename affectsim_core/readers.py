"""Reading untrusted files: only regular files are opened, sizes are checked before anything is read,
and every failure becomes one :class:`~affectsim_core.errors.InvalidInput` naming the file.

A file given by a user (a manifest, a split, a scene, a joint map) may be a directory, a FIFO (opening
it for reading would block for ever), a device, a link to ``/proc/self/pagemap`` (reading it fails
with ``EINVAL``), bytes that are not UTF-8, or a document that the parsers cannot hold: nesting
100,000 deep (``RecursionError``), an integer of 100,000 digits (Python's int-string conversion
limit, ``ValueError``), YAML aliases that expand a small file into a huge one. The readers here turn
each of these into a refusal naming the path and what was expected; documents are also limited to
:data:`MAX_DEPTH` levels of nesting, so that no later recursive walk over them can overflow.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import yaml

from affectsim_core.errors import InvalidInput

MAX_DEPTH = 64  # nesting of a JSON or YAML document (the project's own files nest at most 6 deep)


def read_bytes(path: Path, max_bytes: int, field: str) -> bytes:
    """The bytes of the regular file at ``path`` (links followed), at most ``max_bytes`` of them.

    A directory, FIFO, socket or device is refused before it is opened; a file larger than ``max_bytes``
    before it is read; a file whose contents are not the size ``stat`` gives (a pseudo-file under
    ``/proc``, which reports 0 bytes; a file written meanwhile) after one byte more than that size was
    asked for; any ``OSError`` naming ``field`` and the path."""
    path = Path(path)
    not_regular = "a regular file (not a directory, FIFO or device)"
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise InvalidInput(field, str(path), not_regular)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # never blocks, were it swapped for a FIFO since
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise InvalidInput(field, str(path), not_regular)
            if st.st_size > max_bytes:
                raise InvalidInput(field, f"{path}: {st.st_size} bytes", f"a file of at most {max_bytes} bytes")
            data = f.read(st.st_size + 1)
    except FileNotFoundError:
        raise InvalidInput(field, str(path), "an existing file") from None
    except OSError as exc:
        raise InvalidInput(field, str(path), f"a readable regular file ({exc.strerror or exc})") from None
    if len(data) != st.st_size:
        raise InvalidInput(field, str(path), f"a file of the {st.st_size} bytes its size says (not a pseudo-file "
                                             "under /proc, not one being written)")
    return data


def decode_text(data: bytes, field: str, where: str) -> str:
    """``data`` as UTF-8 text; bytes that are not UTF-8 are refused naming ``where``."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(field, where, f"UTF-8 text (byte {exc.start} is {data[exc.start:exc.start + 1]!r})") from None


def read_text(path: Path, max_bytes: int, field: str) -> str:
    """The UTF-8 text of the regular file at ``path`` (see :func:`read_bytes`)."""
    return decode_text(read_bytes(path, max_bytes, field), field, str(path))


def check_depth(doc: Any, field: str, where: str, max_depth: int = MAX_DEPTH) -> Any:
    """``doc`` if its lists and mappings nest at most ``max_depth`` deep (walked level by level, without
    recursion: ~0.2 s for the 27,647 episodes of the full dataset)."""
    level, depth = ([doc] if isinstance(doc, (dict, list)) else []), 0
    while level:
        depth += 1
        if depth > max_depth:
            raise InvalidInput(field, where, f"a document nested at most {max_depth} levels deep")
        below: list = []
        for node in level:
            below.extend(c for c in (node.values() if isinstance(node, dict) else node) if isinstance(c, (dict, list)))
        level = below
    return doc


def parse_json(text: str | bytes, field: str, where: str) -> Any:
    """The JSON document ``text`` (``NaN``/``Infinity`` allowed, as the project writes them), nesting
    checked; anything the parser cannot hold is refused naming ``where``."""
    try:
        doc = json.loads(text)
    except RecursionError:
        raise InvalidInput(field, where, f"JSON nested at most {MAX_DEPTH} levels deep") from None
    except UnicodeDecodeError as exc:
        raise InvalidInput(field, where, f"UTF-8 JSON ({exc.reason} at byte {exc.start})") from None
    except ValueError as exc:  # JSONDecodeError, and an integer beyond Python's int-string conversion limit
        raise InvalidInput(field, where, _expected("JSON", exc)) from None
    return check_depth(doc, field, where)


class _TreeLoader(yaml.SafeLoader):
    """The safe loader without anchors and aliases: a 1 KB file of aliases can stand for billions of nodes."""

    def compose_node(self, parent, index):  # type: ignore[no-untyped-def]
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed", mark)
        return super().compose_node(parent, index)


def parse_yaml(text: str, field: str, where: str) -> Any:
    """The YAML document ``text`` (safe tags only, no aliases), nesting checked; refused naming ``where``."""
    try:
        doc = yaml.load(text, Loader=_TreeLoader)  # noqa: S506 (a SafeLoader)
    except RecursionError:
        raise InvalidInput(field, where, f"YAML nested at most {MAX_DEPTH} levels deep") from None
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: an integer beyond the int-string conversion limit
        raise InvalidInput(field, where, _expected("YAML", exc)) from None
    return check_depth(doc, field, where)


def read_json(path: Path, max_bytes: int, field: str) -> Any:
    """The JSON document in the regular file at ``path`` of at most ``max_bytes``, refused naming ``field``
    and the path if it is not (see :func:`read_bytes` and :func:`parse_json`)."""
    return parse_json(read_text(path, max_bytes, field), field, str(path))


def read_yaml(path: Path, max_bytes: int, field: str) -> Any:
    """The YAML document in the regular file at ``path`` of at most ``max_bytes`` (see :func:`parse_yaml`)."""
    return parse_yaml(read_text(path, max_bytes, field), field, str(path))


def _expected(kind: str, exc: Exception, limit: int = 160) -> str:
    """What a document that failed to parse with ``exc`` should have been, on one line."""
    text = " ".join(str(exc).split())
    if "integer string conversion" in text:
        return f"valid {kind} with integers of at most {sys.get_int_max_str_digits()} digits"
    return f"valid {kind} ({text if len(text) <= limit else text[:limit] + '...'})"

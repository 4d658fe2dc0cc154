"""Episode schema and storage: versioned gzipped JSON per split, in the style of habitat-lab datasets.

``e = C(m, S, p_h, x0, c)`` (PROTOCOL.md section 1) as a replayable configuration::

    {"format": "affectsim-episodes/1", "split": "test", "episodes": [
      {"episode_id": "test_oc_000042", "scene_id": "scene_012",
       "start_position": [x, y, 0.0], "start_rotation": [w, x, y, z],      # robot x0, map frame
       "family": "observation_controlled", "challenge": "rear_view",      # or null
       "emotion": "sad", "action": "standing", "group": "oc_OC07_...",     # label and split group
       "humans": [{"role": "target", "motion_id": "...", "x": .., "y": .., "yaw": .., "phase": s,
                   "description": "red top, dark trousers"}],
       "monitor_room": "living_room_0", "seed": 123,
       "measures": {"initial_distance": m, "relative_orientation": rad, "visible_fraction": 0..1,
                    "geodesic": m, "euclidean": m}}]}

A manifest (``manifest.json``) lists each split file with its SHA-256 and counts. Files are
written to a temporary name and renamed; the loader checks checksum, schema and references
and names the episode and field of any problem.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import tempfile
from pathlib import Path

from affectsim_bridge.humans.motion import EMOTIONS
from affectsim_ros.core.errors import InvalidInput

FORMAT = "affectsim-episodes/1"
FAMILIES = ("action_grounded", "observation_controlled", "dyadic")
CHALLENGES = ("far_visible", "rear_view", "partial_occlusion", "obstacle_detour")
SPLITS = ("train", "val", "test")
DATASET_DIR = Path(__file__).resolve().parents[2] / "data" / "episodes"


def quat_from_yaw(yaw: float) -> list[float]:
    return [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]


def check_episode(ep: dict, where: str) -> None:
    """Schema check of one episode dict; raises :class:`InvalidInput` naming episode and field."""
    eid = ep.get("episode_id", "<no id>") if isinstance(ep, dict) else "<not a mapping>"
    w = f"{where}: episode {eid}"
    if not isinstance(ep, dict):
        raise InvalidInput("episode", type(ep).__name__, "a mapping", where=where)

    def need(key: str, typ, ok=lambda v: True, expected: str = ""):
        if key not in ep:
            raise InvalidInput(key, None, "a value (field is required)", where=w)
        v = ep[key]
        if not isinstance(v, typ) or not ok(v):
            raise InvalidInput(key, v, expected or getattr(typ, "__name__", str(typ)), where=w)
        return v

    finite = lambda xs: all(isinstance(x, (int, float)) and math.isfinite(x) for x in xs)  # noqa: E731
    need("episode_id", str, bool, "a non-empty string")
    need("scene_id", str, bool, "a non-empty string")
    need("start_position", list, lambda v: len(v) == 3 and finite(v), "[x, y, z] finite metres")
    need("start_rotation", list, lambda v: len(v) == 4 and finite(v) and abs(sum(x * x for x in v) - 1) < 1e-6,
         "a unit quaternion [w, x, y, z]")
    need("family", str, lambda v: v in FAMILIES, f"one of {FAMILIES}")
    need("emotion", str, lambda v: v in EMOTIONS, f"one of {EMOTIONS}")
    ch = ep.get("challenge")
    if ch is not None and ch not in CHALLENGES:
        raise InvalidInput("challenge", ch, f"null or one of {CHALLENGES}", where=w)
    if (ep["family"] == "observation_controlled") != (ch is not None):
        raise InvalidInput("challenge", ch, "a challenge exactly for observation-controlled episodes", where=w)
    humans = need("humans", list, lambda v: 1 <= len(v) <= 2, "1 or 2 people")
    roles = [h.get("role") for h in humans if isinstance(h, dict)]
    if roles.count("target") != 1:
        raise InvalidInput("humans[].role", roles, "exactly one 'target'", where=w)
    for i, h in enumerate(humans):
        for key in ("x", "y", "yaw", "phase"):
            if not finite([h.get(key)]):
                raise InvalidInput(f"humans[{i}].{key}", h.get(key), "a finite number", where=w)
        if not isinstance(h.get("motion_id"), str):
            raise InvalidInput(f"humans[{i}].motion_id", h.get("motion_id"), "a motion id", where=w)
    need("seed", int)


def write_split(path: Path, split: str, episodes: list[dict]) -> str:
    """Write a split file atomically; returns its SHA-256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    ids = set()
    for ep in episodes:
        check_episode(ep, str(path))
        if ep["episode_id"] in ids:
            raise InvalidInput("episode_id", ep["episode_id"], "unique episode ids (duplicate)", where=str(path))
        ids.add(ep["episode_id"])
    data = gzip.compress(json.dumps({"format": FORMAT, "split": split, "episodes": episodes},
                                    separators=(",", ":")).encode(), mtime=0)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return hashlib.sha256(data).hexdigest()


def load_split(split: str, root: Path = DATASET_DIR, scenes: set[str] | None = None,
               motions: set[str] | None = None) -> list[dict]:
    """Load and validate a split: checksum against the manifest, schema, unique ids, references."""
    if split not in SPLITS:
        raise InvalidInput("split", split, f"one of {SPLITS}")
    manifest_path = Path(root) / "manifest.json"
    if not manifest_path.is_file():
        raise InvalidInput("dataset", str(root), "a built dataset (run `affectsim dataset build`)")
    try:
        manifest = json.loads(manifest_path.read_text())
    except json.JSONDecodeError as exc:
        raise InvalidInput("manifest.json", str(manifest_path), f"valid JSON ({exc})") from None
    entry = manifest.get("splits", {}).get(split)
    if entry is None:
        raise InvalidInput("manifest.splits", sorted(manifest.get("splits", {})), f"an entry for {split!r}",
                           where=str(manifest_path))
    path = Path(root) / entry["file"]
    try:
        raw = path.read_bytes()
    except OSError:
        raise InvalidInput("file", str(path), "an existing split file") from None
    if hashlib.sha256(raw).hexdigest() != entry["sha256"]:
        raise InvalidInput("sha256", str(path), "the checksum in manifest.json (file changed or truncated)")
    try:
        doc = json.loads(gzip.decompress(raw))
    except (OSError, EOFError, json.JSONDecodeError, gzip.BadGzipFile) as exc:
        raise InvalidInput("<file>", str(path), f"gzipped JSON ({exc})") from None
    if doc.get("format") != FORMAT:
        raise InvalidInput("format", doc.get("format"), repr(FORMAT), where=str(path))
    ids = set()
    for ep in doc["episodes"]:
        check_episode(ep, str(path))
        if ep["episode_id"] in ids:
            raise InvalidInput("episode_id", ep["episode_id"], "unique episode ids (duplicate)", where=str(path))
        ids.add(ep["episode_id"])
        if scenes is not None and ep["scene_id"] not in scenes:
            raise InvalidInput("scene_id", ep["scene_id"], "a scene of the scene library",
                               where=f"{path}: episode {ep['episode_id']}")
        if motions is not None:
            for i, h in enumerate(ep["humans"]):
                if h["motion_id"] not in motions:
                    raise InvalidInput(f"humans[{i}].motion_id", h["motion_id"], "a clip of the motion library",
                                       where=f"{path}: episode {ep['episode_id']}")
    return doc["episodes"]

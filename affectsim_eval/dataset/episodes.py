"""Episode storage: versioned gzipped JSON per split, in the style of habitat-lab datasets::

    {"format": "affectsim-episodes/1", "split": "test", "episodes": [<Episode.to_dict()>, ...]}

Each episode is an :class:`~affectsim_core.episode.Episode` (its JSON form is documented there).

A manifest (``manifest.json``) lists each split file with its SHA-256 and counts. Files are
written to a temporary name and renamed; the loader checks checksum, schema and references
and names the episode and field of any problem.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
from pathlib import Path

from affectsim_core.episode import Episode
from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import SPLITS

FORMAT = "affectsim-episodes/1"
DATASET_DIR = Path(__file__).resolve().parents[2] / "data" / "episodes"


def write_split(path: Path, split: str, episodes: list[Episode]) -> str:
    """Write a split file atomically; returns its SHA-256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    ids = set()
    for ep in episodes:
        Episode.from_dict(ep.to_dict(), str(path))  # what is written must load
        if ep.episode_id in ids:
            raise InvalidInput("episode_id", ep.episode_id, "unique episode ids (duplicate)", where=str(path))
        ids.add(ep.episode_id)
    data = gzip.compress(json.dumps({"format": FORMAT, "split": split, "episodes": [e.to_dict() for e in episodes]},
                                    separators=(",", ":")).encode(), mtime=0)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return hashlib.sha256(data).hexdigest()


def load_split(split: str, root: Path = DATASET_DIR, scenes: set[str] | None = None,
               motions: set[str] | None = None) -> list[Episode]:
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
    found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
    if found != FORMAT:
        raise InvalidInput("format", found, repr(FORMAT), where=str(path))
    ids = set()
    episodes = []
    if not isinstance(doc.get("episodes"), list):
        raise InvalidInput("episodes", type(doc.get("episodes")).__name__, "a list of episodes", where=str(path))
    for raw_ep in doc["episodes"]:
        ep = Episode.from_dict(raw_ep, str(path))
        if ep.episode_id in ids:
            raise InvalidInput("episode_id", ep.episode_id, "unique episode ids (duplicate)", where=str(path))
        ids.add(ep.episode_id)
        if scenes is not None and ep.scene_id not in scenes:
            raise InvalidInput("scene_id", ep.scene_id, "a scene of the scene library",
                               where=f"{path}: episode {ep.episode_id}")
        if motions is not None:
            for i, h in enumerate(ep.humans):
                if h.motion_id not in motions:
                    raise InvalidInput(f"humans[{i}].motion_id", h.motion_id, "a clip of the motion library",
                                       where=f"{path}: episode {ep.episode_id}")
        episodes.append(ep)
    return episodes

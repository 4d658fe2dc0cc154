"""Episode storage: versioned gzipped JSON per split, in the style of habitat-lab datasets::

    {"format": "affectsim-episodes/1", "split": "test", "episodes": [<Episode.to_dict()>, ...]}

Each episode is an :class:`~affectsim_core.episode.Episode` (its JSON form is documented there).

A manifest (``manifest.json``) lists each split file with its SHA-256 and counts, and the dataset's
:func:`dataset_version` (a hash of the split hashes). Files are
written to a temporary name and renamed; the loader checks checksum, schema and references
and names the episode and field of any problem.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tempfile
import zlib
from pathlib import Path

from affectsim_core.episode import Episode
from affectsim_core.errors import InvalidInput
from affectsim_core.names import inside
from affectsim_core.protocol import SPLITS
from affectsim_core.readers import parse_json, read_bytes, read_json

FORMAT = "affectsim-episodes/1"
MAX_MANIFEST_BYTES = 1 * 2 ** 20  # the dataset manifest (~2 KB)
MAX_SPLIT_BYTES = 64 * 2 ** 20  # one gzipped split file (train: 2.6 MB)
MAX_SPLIT_JSON_BYTES = 512 * 2 ** 20  # its JSON once decompressed (train: 15 MB)
DATASET_DIR = Path(__file__).resolve().parents[2] / "data" / "episodes"
GET_A_DATASET = (  # what a missing dataset's error tells a user to run
    "run `make bench` once, or `affectsim motions build && affectsim scenes build && affectsim dataset install` "
                 "(the shipped episodes; `affectsim dataset build` builds your own)")


def dataset_version(split_sha256: dict[str, str]) -> str:
    """The dataset's version: the first 12 hex digits of the SHA-256 over its split files' SHA-256 in
    split order (train, val, test; a missing split counts as empty). Content-addressed: any change to any episode changes it; recorded
    in the dataset manifest, every checkpoint manifest and every run's metadata."""
    return hashlib.sha256(",".join(f"{s}:{split_sha256.get(s, '')}" for s in SPLITS).encode()).hexdigest()[:12]


def read_manifest(root: Path = DATASET_DIR) -> dict:
    """The dataset manifest, checked: size, JSON, a split table, and a ``version`` (when recorded) that
    matches the split hashes. Manifests written before versions were recorded get theirs computed."""
    path = Path(root) / "manifest.json"
    if not path.is_file():
        raise InvalidInput("dataset", str(root), f"a built dataset: {GET_A_DATASET}")
    manifest = read_json(path, MAX_MANIFEST_BYTES, "manifest.json")
    splits = manifest.get("splits") if isinstance(manifest, dict) else None
    if not isinstance(splits, dict):
        raise InvalidInput("manifest.splits", type(splits).__name__, "a mapping of split name to file entry",
                           where=str(path))
    for split, entry in splits.items():
        if not (isinstance(entry, dict) and isinstance(entry.get("sha256"), str) and isinstance(entry.get("file"), str)):
            raise InvalidInput(f"manifest.splits.{split}", entry, '{"file": name, "sha256": hex digest, ...}',
                               where=str(path))
    version = dataset_version({s: e["sha256"] for s, e in splits.items()})
    if manifest.setdefault("version", version) != version:
        raise InvalidInput("manifest.version", manifest["version"], f"{version!r}, the version of its split hashes",
                           where=str(path))
    return manifest


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
    splits = read_manifest(root)["splits"]
    entry = splits.get(split)
    if entry is None:
        raise InvalidInput("manifest.splits", sorted(splits), f"an entry for {split!r}", where=str(manifest_path))
    path = inside(Path(root), entry["file"], field=f"manifest.splits.{split}.file")
    raw = read_bytes(path, MAX_SPLIT_BYTES, "split file")  # a regular file: a FIFO would block the reader
    if hashlib.sha256(raw).hexdigest() != entry["sha256"]:
        raise InvalidInput("sha256", str(path), "the checksum in manifest.json (file changed or truncated)")
    try:
        text = gzip.GzipFile(fileobj=io.BytesIO(raw)).read(MAX_SPLIT_JSON_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise InvalidInput("split file", str(path), f"gzipped JSON ({type(exc).__name__}: {exc})") from None
    if len(text) > MAX_SPLIT_JSON_BYTES:
        raise InvalidInput("split file", str(path), f"at most {MAX_SPLIT_JSON_BYTES} bytes of JSON once decompressed")
    doc = parse_json(text, "split file", str(path))
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

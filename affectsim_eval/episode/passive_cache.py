"""Passive settings computed once: P-Init, P-Ref and P-Mon do not depend on the policy.

What the orchestrator computes for an episode's passive settings — the reference observer's
choice, the visible-body fractions, d*(r) of E-SPL, every recognizer's prediction of each passive clip (and, for
an evolving episode, of each passive stream's windows) and the P-Init frames (the A-Obs fallback
and the run's thumbnail) — is stored under a key of everything that determines it:

- the episode (its whole definition) and the people mode (scripted or reactive);
- the data directory's content (the manifests of ``motions/``, ``scenes/`` and ``episodes/``, which
  hold the checksums of every file);
- the simulator backend and the code that renders and recognises (every source file of
  :data:`CODE_PACKAGES`);
- each recognizer: the source file of its class and the files of its checkpoint directory.

The policy, the execution mode and the run's other settings are not in the key: a run with a new
policy finds the passive settings of any earlier run over the same episodes and computes A-Obs
only. A recognizer that answers from a server (``remote = True``, e.g. ``vlm-openai``) has no
fixed content: a run with one is not cached (:func:`identity` says why).

An entry is one file ``<key>.npz`` in the cache directory: a first line with the SHA-256 of the
rest, then an ``.npz`` (the P-Init frames and the JSON of the rest). It is written to a temporary
file and renamed, so concurrent workers (processes, Ray actors) can share a directory and a
killed run leaves only whole entries; it is checked on use (size limit :data:`MAX_ENTRY_BYTES`
before reading, then the checksum): a damaged entry is removed and computed again, with a warning.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from affectsim_core.episode import Episode
from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import CLIP_FRAMES, PASSIVE_SETTINGS
from affectsim_perception.recognizers.base import CHECKPOINT_DIR, RECOGNIZERS, Prediction

FORMAT = 1  # of an entry; part of the key
MAX_ENTRY_BYTES = 64 * 2**20  # an entry holds 8 frames of 224x224x3 (compressed) and a few kB of JSON: ~0.11 MB
ROOT = Path(__file__).resolve().parents[2]
#: the code whose change changes a passive result: rendering, people, scenes, recognizers, the orchestration, d*
CODE_PACKAGES = ("affectsim_core", "affectsim_bridge", "affectsim_perception", "affectsim_eval/episode",
                 "affectsim_eval/scoring/metrics.py")
STALE_TMP_S = 3600.0  # a temporary file this old is a killed writer's: removed when a cache is opened
DATA_MANIFESTS = ("motions/manifest.json", "scenes/manifest.json", "episodes/manifest.json")


@dataclass(frozen=True)
class PassiveResult:
    """An episode's passive settings: ``plan`` the reference observer's (frame, distance m, angle
    rad) or None; ``visible`` per passive setting; ``predictions[setting][recognizer]``;
    ``streams[setting][recognizer]`` the (window centre s, prediction) of an evolving episode's
    stream, else None; ``p_init_frames`` (8, 224, 224, 3) uint8; ``d_star`` d*(r) per E-SPL radius
    (m or None: it depends on the start and the target only)."""

    plan: tuple[str, float, float] | None
    visible: dict[str, float]
    predictions: dict[str, dict[str, Prediction]]
    streams: dict[str, dict[str, list[tuple[float, Prediction]]]] | None
    p_init_frames: np.ndarray
    d_star: dict[str, float | None]


def _sha_files(paths: Sequence[Path], base: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(str(p.relative_to(base)).encode() + b"\0")
        h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def code_hash(root: Path = ROOT) -> str:
    """SHA-256 over the source files of :data:`CODE_PACKAGES` (paths and contents)."""
    paths = [p for pkg in CODE_PACKAGES for p in ([root / pkg] if pkg.endswith(".py") else (root / pkg).rglob("*.py"))]
    return _sha_files(paths, root)


def _recognizer(name: str) -> dict[str, str] | str:
    """What fixes a recognizer's answers, or why nothing does (a string)."""
    cls = RECOGNIZERS.get(name)
    if getattr(cls, "remote", False):
        return f"recognizer {name!r} answers from a server"
    source = Path(inspect.getsourcefile(cls) or "")
    root = Path(getattr(cls, "checkpoint_root", None) or CHECKPOINT_DIR)
    checkpoints = {}
    for n in (name, *getattr(cls, "combines", ())):  # an ensemble's answers follow its members' weights too
        ck = (root if n == name else CHECKPOINT_DIR) / n
        checkpoints[n] = _sha_files([p for p in ck.rglob("*") if p.is_file()], ck) if ck.is_dir() else ""
    return {"source": hashlib.sha256(source.read_bytes()).hexdigest() if source.is_file() else "",
            "checkpoints": checkpoints}


def identity(recognizers: Sequence[str], backend: str, data_dir: Path, renderer: Mapping | None = None) -> dict | str:
    """The part of every key that is the same for a whole run, or the reason the run cannot be cached;
    ``renderer``: the settings of whatever renders the passive views outside this process (the bridge
    node's parameters, through the ROS graph)."""
    recs = {}
    for n in recognizers:
        r = _recognizer(n)
        if isinstance(r, str):
            return r
        recs[n] = r
    data = Path(data_dir)
    return {"format": FORMAT, "code": code_hash(), "backend": backend, "recognizers": recs,
            "renderer": dict(renderer or {}), "libraries": _libraries(),
            "data": {m: hashlib.sha256((data / m).read_bytes()).hexdigest() if (data / m).is_file() else ""
                     for m in DATA_MANIFESTS}}


def _libraries() -> dict[str, str]:
    """Versions of the installed libraries that render and recognise, and the GL backend."""
    from importlib import metadata

    out = {"MUJOCO_GL": os.environ.get("MUJOCO_GL", "")}
    for dist in ("mujoco", "mediapipe", "numpy", "torch"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = ""
    return out


def _pred(p: Prediction) -> dict:
    return {"probs": [float(v) for v in p.probs], "label": p.label, "outcome": p.outcome, "detail": p.detail,
            "vad": None if p.vad is None else [float(v) for v in p.vad]}


def _unpred(d: dict) -> Prediction:
    return Prediction(np.array(d["probs"], float), d["label"], d["outcome"], d["detail"],
                      None if d["vad"] is None else np.array(d["vad"], float))


class PassiveCache:
    """Passive results by content in ``directory``; ``run_identity`` from :func:`identity`."""

    def __init__(self, directory: Path, run_identity: Mapping, warn: Callable[[str], None] = print) -> None:
        self.dir = Path(directory)
        self.prefix = hashlib.sha256(json.dumps(run_identity, sort_keys=True).encode()).hexdigest()
        self.warn = warn
        self.hits = self.misses = 0

    def key(self, ep: Episode, humans: str, scene_source: str = "") -> str:
        """The entry's key; ``scene_source``: the scene's file (its content is hashed: an edited scene
        file is another key, whatever the manifest says)."""
        scene = Path(scene_source)
        digest = hashlib.sha256(scene.read_bytes()).hexdigest() if scene_source and scene.is_file() else scene_source
        body = json.dumps({"run": self.prefix, "episode": ep.to_dict(), "humans": humans, "scene": digest},
                          sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.dir / f"{key}.npz"

    def get(self, key: str) -> PassiveResult | None:
        """The stored result, or None (absent, or damaged: then removed)."""
        path = self._path(key)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            self.misses += 1
            return None
        try:
            if size > MAX_ENTRY_BYTES:
                raise ValueError(f"{size} bytes, over the limit of {MAX_ENTRY_BYTES}")
            raw = path.read_bytes()
            head, _, body = raw.partition(b"\n")
            if hashlib.sha256(body).hexdigest().encode() != head:
                raise ValueError("its checksum does not match its content")
            with np.load(io.BytesIO(body), allow_pickle=False) as z:
                meta, frames = json.loads(bytes(z["meta"]).decode()), np.array(z["p_init_frames"])
            if frames.dtype != np.uint8 or frames.shape[0] != CLIP_FRAMES or frames.ndim != 4 or frames.shape[3] != 3:
                raise ValueError(f"p_init_frames {frames.dtype} {frames.shape}, expected uint8 ({CLIP_FRAMES}, H, W, 3)")
            if set(meta["predictions"]) != set(PASSIVE_SETTINGS) or set(meta["visible"]) != set(PASSIVE_SETTINGS):
                raise ValueError(f"settings {sorted(meta['predictions'])}, expected {sorted(PASSIVE_SETTINGS)}")
            result = PassiveResult(
                None if meta["plan"] is None else (str(meta["plan"][0]), float(meta["plan"][1]), float(meta["plan"][2])),
                {s: float(v) for s, v in meta["visible"].items()},
                {s: {n: _unpred(p) for n, p in v.items()} for s, v in meta["predictions"].items()},
                None if meta["streams"] is None else {
                    s: {n: [(float(t), _unpred(p)) for t, p in w] for n, w in v.items()}
                    for s, v in meta["streams"].items()}, frames,
                {str(r): None if v is None else float(v) for r, v in meta["d_star"].items()})
        except FileNotFoundError:  # removed by another worker in between
            self.misses += 1
            return None
        except Exception as exc:  # noqa: BLE001 - any damage (zip, JSON, shape, I/O): computed again
            self.warn(f"passive cache: {path} is damaged ({type(exc).__name__}: {exc}); removed, computing it again")
            try:
                path.unlink(missing_ok=True)
            except OSError as gone:
                self.warn(f"passive cache: could not remove {path}: {gone}")
            self.misses += 1
            return None
        self.hits += 1
        return result

    def put(self, key: str, result: PassiveResult) -> None:
        """Store ``result`` atomically (a concurrent writer of the same key writes the same content); a
        failure to store (a full or read-only disk, a value JSON cannot hold) is a warning, never the
        episode's failure."""
        try:
            self._put(key, result)
        except Exception as exc:  # noqa: BLE001 - the episode's record is complete without the entry
            self.warn(f"passive cache: could not store {self._path(key)} ({type(exc).__name__}: {exc})")

    def _put(self, key: str, result: PassiveResult) -> None:
        meta = {"plan": None if result.plan is None else list(result.plan), "visible": result.visible,
                "d_star": result.d_star,
                "predictions": {s: {n: _pred(p) for n, p in v.items()} for s, v in result.predictions.items()},
                "streams": None if result.streams is None else {
                    s: {n: [[t, _pred(p)] for t, p in w] for n, w in v.items()} for s, v in result.streams.items()}}
        buf = io.BytesIO()
        np.savez_compressed(buf, meta=np.frombuffer(json.dumps(meta).encode(), np.uint8),
                            p_init_frames=np.ascontiguousarray(result.p_init_frames, np.uint8))
        body = buf.getvalue()
        if len(body) > MAX_ENTRY_BYTES:
            raise InvalidInput("passive cache entry", f"{len(body)} bytes", f"at most {MAX_ENTRY_BYTES} bytes")
        self.dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=f".{key[:16]}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
            os.replace(tmp, self._path(key))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


OFF = "off"  # the cache setting that turns the cache off
DEFAULT_SUBDIR = Path("cache") / "passive"  # under the data directory: shared by every run on that data


def open_cache(setting: str, data_dir: Path, recognizers: Sequence[str], backend: str,
               warn: Callable[[str], None] = print, renderer: Mapping | None = None) -> PassiveCache | None:
    """The run's cache from its setting: ``""`` the data directory's ``cache/passive``, ``"off"`` none,
    else that directory; None too (with a warning saying why) when the run's recognizers have no fixed
    content."""
    if setting == OFF:
        return None
    found = identity(recognizers, backend, data_dir, renderer)
    if isinstance(found, str):
        warn(f"passive cache off: {found}, so its answers are not fixed content")
        return None
    cache = PassiveCache((Path(setting) if setting else Path(data_dir) / DEFAULT_SUBDIR).resolve(), found, warn)
    for tmp in cache.dir.glob(".*.tmp") if cache.dir.is_dir() else ():  # killed writers' leftovers
        try:
            if time.time() - tmp.stat().st_mtime > STALE_TMP_S:
                tmp.unlink()
        except OSError:
            pass  # another worker removed it, or it is not ours to remove
    return cache

"""Recognizer API: a clip in, probabilities over the five emotions and a label out.

Every recognizer receives the same input in every observation setting (docs/protocol.md §7):
8 RGB frames resized to 224x224 (optionally registered depth and frame times). Weights are
loaded read-only from a checkpoint whose SHA-256 is verified against its manifest; nothing here
trains.

Two optional parts (evolving affect, docs/affect.md): a :class:`Prediction` may carry a
valence-arousal-dominance estimate (``vad``, three numbers in [-1, 1]) from recognizers that make
one (``Recognizer.estimates_vad``), and :meth:`Recognizer.predict_stream` labels every window of
8 consecutive frames of a longer stamped stream (:class:`StreamInput`); by default it calls
``predict`` per window, and a recognizer may do it faster with the same results.
"""

from __future__ import annotations

import abc
import hashlib
import io
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from affectsim_core.errors import InvalidInput
from affectsim_core.names import inside
from affectsim_core.protocol import CLIP_FRAMES, CLIP_SIZE, EMOTIONS
from affectsim_core.readers import read_bytes, read_json
from affectsim_core.registry import Registry

CHECKPOINT_DIR = Path(__file__).resolve().parents[1] / "checkpoints"
MAX_MANIFEST_BYTES = 2 ** 20  # a checkpoint manifest (~20 KB)
MAX_WEIGHTS_BYTES = 256 * 2 ** 20  # its weights.npz (the shipped ones: < 20 MB)


@dataclass(frozen=True)
class ClipInput:
    """``frames`` (8, 224, 224, 3) uint8 RGB; ``depth`` (8, 224, 224) float32 metres or None;
    ``times`` (8,) sim seconds or None."""

    frames: np.ndarray
    depth: np.ndarray | None = None
    times: np.ndarray | None = None

    def __post_init__(self) -> None:
        f = self.frames
        want = (CLIP_FRAMES, CLIP_SIZE, CLIP_SIZE, 3)
        if not isinstance(f, np.ndarray) or f.shape != want or f.dtype != np.uint8:
            got = (getattr(f, "shape", None), str(getattr(f, "dtype", type(f).__name__)))
            raise InvalidInput("clip.frames", got, f"an array of shape {want} and dtype uint8")
        if self.depth is not None and (self.depth.shape != want[:3] or self.depth.dtype != np.float32):
            raise InvalidInput("clip.depth", (self.depth.shape, str(self.depth.dtype)), f"None or {want[:3]} float32")
        if self.times is not None and np.shape(self.times) != (CLIP_FRAMES,):
            raise InvalidInput("clip.times", np.shape(self.times), f"None or ({CLIP_FRAMES},) seconds")

    def digest(self) -> str:
        """SHA-256 of the frames (cache key)."""
        return hashlib.sha256(np.ascontiguousarray(self.frames).tobytes()).hexdigest()


MAX_STREAM_FRAMES = 2400  # frames of one stream (10 min at 4 Hz; 2400 x 224 x 224 x 3 bytes = 361 MB)


@dataclass(frozen=True)
class StreamInput:
    """A longer observation: ``frames`` (N, 224, 224, 3) uint8 RGB with N >= 8, ``times`` (N,)
    strictly increasing sim seconds, ``depth`` (N, 224, 224) float32 metres or None."""

    frames: np.ndarray
    times: np.ndarray
    depth: np.ndarray | None = None

    def __post_init__(self) -> None:
        f = self.frames
        if not isinstance(f, np.ndarray) or f.ndim != 4 or f.shape[1:] != (CLIP_SIZE, CLIP_SIZE, 3) \
                or f.dtype != np.uint8 or not CLIP_FRAMES <= len(f) <= MAX_STREAM_FRAMES:
            got = (getattr(f, "shape", None), str(getattr(f, "dtype", type(f).__name__)))
            raise InvalidInput("stream.frames", got, f"(N, {CLIP_SIZE}, {CLIP_SIZE}, 3) uint8 with "
                               f"{CLIP_FRAMES} <= N <= {MAX_STREAM_FRAMES}")
        t = np.asarray(self.times, float)
        if t.shape != (len(f),) or not np.isfinite(t).all() or (np.diff(t) <= 0).any():
            raise InvalidInput("stream.times", np.shape(self.times), f"({len(f)},) strictly increasing seconds")
        if self.depth is not None and (self.depth.shape != f.shape[:3] or self.depth.dtype != np.float32):
            raise InvalidInput("stream.depth", (self.depth.shape, str(self.depth.dtype)), f"None or {f.shape[:3]} float32")

    def starts(self, stride: int = 1) -> list[tuple[int, float]]:
        """(first frame index, centre time s) of every window of 8 consecutive frames, every
        ``stride`` frames."""
        if not isinstance(stride, int) or stride < 1:
            raise InvalidInput("stride", stride, "a whole number of frames >= 1")
        t = np.asarray(self.times, float)
        return [(i, float(0.5 * (t[i] + t[i + CLIP_FRAMES - 1])))
                for i in range(0, len(self.frames) - CLIP_FRAMES + 1, stride)]

    def windows(self, stride: int = 1) -> list[tuple[float, ClipInput]]:
        """(centre time s, clip) of every window of 8 consecutive frames, every ``stride`` frames."""
        out = []
        for i, c in self.starts(stride):
            d = None if self.depth is None else self.depth[i:i + CLIP_FRAMES]
            out.append((c, ClipInput(self.frames[i:i + CLIP_FRAMES], d, np.asarray(self.times[i:i + CLIP_FRAMES], float))))
        return out


@dataclass(frozen=True)
class Prediction:
    """``probs`` (5,) over :data:`EMOTIONS` summing to 1; ``label`` the predicted emotion (None unless
    ``outcome`` is "ok"); ``outcome`` "ok", "unparseable" (an answer without a label) or "error";
    ``vad`` (3,) valence, arousal, dominance in [-1, 1] from a recognizer that estimates them, else None."""

    probs: np.ndarray
    label: str | None
    outcome: str = "ok"
    detail: str = ""
    vad: np.ndarray | None = None

    @staticmethod
    def from_probs(probs, detail: str = "", vad=None) -> "Prediction":
        p = np.asarray(probs, float)
        if p.shape != (len(EMOTIONS),) or not np.isfinite(p).all() or (p < 0).any() or p.sum() <= 0:
            raise ValueError(f"probs={p!r} is invalid; expected 5 non-negative finite numbers")
        p = p / p.sum()
        v = None if vad is None else np.asarray(vad, float)
        if v is not None and (v.shape != (3,) or not np.isfinite(v).all() or np.abs(v).max() > 1 + 1e-9):
            raise ValueError(f"vad={vad!r} is invalid; expected 3 finite numbers in [-1, 1]")
        return Prediction(p, EMOTIONS[int(np.argmax(p))], "ok", detail, v)

    @staticmethod
    def failed(outcome: str, detail: str) -> "Prediction":
        """No label: uniform probabilities, recorded with why."""
        return Prediction(np.full(len(EMOTIONS), 1 / len(EMOTIONS)), None, outcome, detail)

    def as_dict(self) -> dict:
        return {"probs": [round(float(v), 6) for v in self.probs], "label": self.label, "outcome": self.outcome,
                "detail": self.detail, **({} if self.vad is None else {"vad": [round(float(v), 6) for v in self.vad]})}


_BLAS: list = []


def single_threaded_blas():
    """Context in which numpy's BLAS runs on the calling thread only. The recognizers' matrix
    products are small; OpenBLAS's worker threads would otherwise keep spinning after each one and
    take the cores from the BlazePose interpreters that run next (committee: 170 -> 100 ms per clip)."""
    if not _BLAS:
        from threadpoolctl import ThreadpoolController  # inspects the loaded BLAS libraries: once, on first use

        _BLAS.append(ThreadpoolController())
    return _BLAS[0].limit(limits=1, user_api="blas")


class Recognizer(abc.ABC):
    """A frozen emotion recognizer."""

    name = ""  # the name it is registered under, set by the registration (RECOGNIZERS)
    estimates_vad = False  # whether its predictions carry ``vad``
    remote = False  # whether it answers from a server (its answers are no fixed content: not cached)
    checkpoint_root: Path | None = None  # where its checkpoint directory is, when not CHECKPOINT_DIR (the
    # passive cache hashes ``checkpoint_root / name``)
    combines: tuple[str, ...] = ()  # the recognizers whose outputs it combines (an ensemble): the report
    # counts each model once by leaving an ensemble of models in the run out of its "distinct" group

    @abc.abstractmethod
    def predict(self, clip: ClipInput) -> Prediction:
        """Probabilities and label for one clip."""

    def predict_stream(self, stream: StreamInput, stride: int = 1) -> list[tuple[float, Prediction]]:
        """(window centre time s, prediction) for every window of 8 consecutive frames of ``stream``,
        every ``stride`` frames, in time order."""
        return [(t, self.predict(clip)) for t, clip in stream.windows(stride)]

    def close(self) -> None:
        """Release resources (models, connections)."""


RECOGNIZERS: Registry[Recognizer] = Registry("recognizer", name_attr="name")


@dataclass(frozen=True)
class Checkpoint:
    """Read-only weights (name -> array) and the manifest they were verified against."""

    arrays: dict[str, np.ndarray]
    manifest: dict = field(default_factory=dict)


def read_manifest(name: str, root: Path = CHECKPOINT_DIR) -> dict:
    """``root/name/manifest.json``, checked: size, JSON, a ``weights_sha256``; any problem names the file."""
    d = inside(Path(root), name, field="checkpoint")
    mpath = d / "manifest.json"
    if not mpath.is_file():
        raise InvalidInput("checkpoint", str(d), f"a directory with manifest.json (run `affectsim train {name}`)")
    manifest = read_json(mpath, MAX_MANIFEST_BYTES, "checkpoint manifest")
    if not isinstance(manifest, dict) or not isinstance(manifest.get("weights_sha256"), str):
        raise InvalidInput("checkpoint manifest", str(mpath), 'a JSON object with "weights_sha256" (hex digest)')
    return manifest


def load_checkpoint(name: str, root: Path = CHECKPOINT_DIR, required: tuple[str, ...] = ()) -> Checkpoint:
    """Load ``root/name/weights.npz``, verifying its SHA-256 against ``root/name/manifest.json``, that it
    holds the ``required`` arrays, and that every array is finite; any problem names the file."""
    manifest = read_manifest(name, root)
    wpath = inside(Path(root), name, field="checkpoint") / "weights.npz"
    size = wpath.stat().st_size if wpath.is_file() else 0
    if not 0 < size <= MAX_WEIGHTS_BYTES:
        raise InvalidInput("checkpoint weights", f"{wpath}: {size} bytes", f"a weights.npz of 1 to {MAX_WEIGHTS_BYTES} bytes")
    blob = read_bytes(wpath, MAX_WEIGHTS_BYTES, "checkpoint weights")
    sha = hashlib.sha256(blob).hexdigest()
    if sha != manifest["weights_sha256"]:
        raise InvalidInput("checkpoint weights", str(wpath),
                           f"SHA-256 {manifest['weights_sha256']} from the manifest (file has {sha}; corrupt or replaced)")
    try:
        with np.load(io.BytesIO(blob), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (ValueError, OSError, zipfile.BadZipFile) as exc:
        raise InvalidInput("checkpoint weights", str(wpath), f"a readable .npz ({exc})") from None
    missing = [k for k in required if k not in arrays]
    if missing:
        raise InvalidInput("checkpoint weights", str(wpath), f"the arrays {missing} of a {name} checkpoint "
                           f"(it has {sorted(arrays)[:8]}{'...' if len(arrays) > 8 else ''}; retrain: "
                           f"affectsim train {name})")
    for k, a in arrays.items():
        if a.dtype.kind not in "biuf" or not np.isfinite(a).all():
            raise InvalidInput(f"checkpoint weights[{k!r}]", str(wpath), "finite numbers (the file holds NaN, "
                               "infinity or non-numeric data)")
        a.setflags(write=False)
    return Checkpoint(arrays, manifest)


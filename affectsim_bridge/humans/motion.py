"""Motion clips: root trajectory plus joint angles at a fixed rate, with the emotion label.

"Affect belongs to the motion" (docs/protocol.md §1): the label, action type,
performer, take, intensity, per-frame valence-arousal-dominance and the emotion
segments travel with the clip. Clips replay cyclically from any starting phase;
generated clips are periodic (pose and velocity continuous across the wrap), and
:func:`loop_error` measures it for imported ones. An evolving clip (``loop_start``
set) plays once from its start and then holds its final state: its last
``frames - loop_start`` frames, one cycle of the final style, repeat seamlessly.

Storage: one compressed ``.npz`` per clip (arrays plus a JSON metadata string), written
atomically. Frames: the root trajectory is in the motion's own floor frame (x forward of
the performance's anchor, z up, metres); placing a clip in a scene is a 2D rigid
transform of that frame (``HumanPlacement``).
"""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from affectsim_bridge.humans.body import BodyShape
from affectsim_bridge.humans.skeleton import DOFS
from affectsim_core.affect import Segment, check_vad, parse_segments, prototype
from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import EMOTIONS
from affectsim_core.readers import parse_json

SOLO_ACTIONS = ("walk", "sit_down", "seated", "knock", "standing")  # what one performer does
ACTIONS = (*SOLO_ACTIONS, "dyadic")
FORMAT = "affectsim-motion/1"
MAX_FRAMES = 60_000  # frames of one clip (over 16 min at 60 fps; the library's clips have a few hundred)
MAX_CLIP_BYTES = 64 * 2 ** 20  # all arrays of one clip once loaded (60,000 frames of the body's DoFs: ~25 MB)
MAX_CLIP_FILE_BYTES = MAX_CLIP_BYTES + 2 ** 20  # the .npz file itself (its arrays, compressed or not, and headers)
#: a joint angle (rad) beyond one full turn either way is no pose: the skeleton's joint limits lie within
#: [-pi/2, 2.97] rad (`affectsim motions validate` checks those); a larger one is a corrupt or hostile clip
MAX_JOINT_RAD = 2 * math.pi


@dataclass(eq=False)
class Motion:
    id: str
    emotion: str
    action: str
    performer: str
    take: int
    fps: float
    root_pos: np.ndarray  # (T, 3) m
    root_rot: np.ndarray  # (T, 3) rad: yaw, pitch, roll
    dofs: np.ndarray  # (T, D) rad, order of skeleton.DOFS
    body: BodyShape = field(default_factory=BodyShape)
    intensity: float = 1.0
    provenance: dict = field(default_factory=dict)
    cyclic: bool = True
    vad: np.ndarray | None = None  # (T, 3) valence, arousal, dominance in [-1, 1]; None: the label's prototype
    segments: tuple[Segment, ...] = ()  # emotion over clip time (s); (): the label over the whole clip
    loop_start: int | None = None  # frame: plays once, then repeats frames [loop_start, T) (evolving clips)

    @property
    def frames(self) -> int:
        return len(self.root_pos)

    @property
    def frame_vad(self) -> np.ndarray:
        """(T, 3) valence, arousal, dominance per frame (the label's prototype when none is stored)."""
        return self.vad if self.vad is not None else np.tile(prototype(self.emotion), (self.frames, 1))

    @property
    def label_segments(self) -> tuple[Segment, ...]:
        """The emotion segments over ``[0, duration)``: the stored ones or the label over the whole clip."""
        return self.segments or (Segment(0.0, self.duration, self.emotion),)

    def vad_at(self, t: float | np.ndarray) -> np.ndarray:
        """VAD (..., 3) at clip time ``t`` (s), with the replay rule of :meth:`sample` (nearest frame)."""
        return self.frame_vad[self._frame_index(np.asarray(t, float))]

    def _frame_index(self, t: np.ndarray) -> np.ndarray:
        f = np.floor(self._replay_frame(t)).astype(int)
        return np.clip(f, 0, self.frames - 1)

    def _replay_frame(self, t: np.ndarray) -> np.ndarray:
        """Fractional frame in [0, T) played at ``t``: cyclic, or once then the held cycle."""
        f = t * self.fps
        if self.loop_start is None:
            return f - np.floor(f / self.frames) * self.frames
        a = float(self.loop_start)
        f = np.maximum(f, 0.0)
        return np.where(f < self.frames, f, a + np.mod(f - a, self.frames - a))

    @property
    def duration(self) -> float:
        """Seconds of one cycle (frames / fps: frame T would equal frame 0)."""
        return self.frames / self.fps

    def validate(self, where: str = "") -> "Motion":
        w = where or self.id
        if self.emotion not in EMOTIONS:
            raise InvalidInput("emotion", self.emotion, f"one of {', '.join(EMOTIONS)}", where=w)
        if self.action not in ACTIONS:
            raise InvalidInput("action", self.action, f"one of {', '.join(ACTIONS)}", where=w)
        if not (np.isfinite(self.fps) and 1 <= self.fps <= 500):
            raise InvalidInput("fps", self.fps, "frames per second in [1, 500]", where=w)
        T = self.frames
        for name, arr, cols in (("root_pos", self.root_pos, 3), ("root_rot", self.root_rot, 3),
                                ("dofs", self.dofs, len(DOFS))):
            if arr.ndim != 2 or arr.shape != (T, cols):
                raise InvalidInput(name, arr.shape, f"shape ({T}, {cols})", where=w)
            if not np.isfinite(arr).all():
                raise InvalidInput(name, "non-finite values", "finite numbers", where=w)
        if T and np.abs(self.dofs).max() > MAX_JOINT_RAD:
            raise InvalidInput("dofs", f"a joint angle of {np.abs(self.dofs).max():.6g} rad",
                               f"joint angles within +-{MAX_JOINT_RAD:.4f} rad (one turn)", where=w)
        if T < 2:
            raise InvalidInput("frames", T, "at least 2 frames", where=w)
        if self.vad is not None:
            self.vad = check_vad(self.vad, T, w)
        if self.segments:
            self.segments = parse_segments([s.to_list() for s in self.segments], self.duration, w)
            if self.segments[-1].emotion != self.emotion:
                raise InvalidInput("emotion", self.emotion, f"the last segment's emotion "
                                   f"{self.segments[-1].emotion!r} (the state the clip holds)", where=w)
        a = self.loop_start
        if a is not None and not (isinstance(a, int) and not isinstance(a, bool) and 0 <= a <= T - 2):
            raise InvalidInput("loop_start", self.loop_start, f"null or a frame in [0, {T - 2}]", where=w)
        self.body.validate()
        return self

    def sample(self, t: float | np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pose at time ``t`` (s, any real; wraps cyclically): root_pos, root_rot, dofs (linear interpolation).

        The root advances by the clip's net displacement on every wrap (zero for clips that
        return to their start, as generated ones do). An evolving clip plays once from t = 0
        (earlier times show its first frame) and then repeats its held cycle.
        """
        t = np.asarray(t, float)
        if self.loop_start is not None:
            f = self._replay_frame(t)
            i0 = np.floor(f).astype(int)
            i1 = np.where(i0 + 1 < self.frames, i0 + 1, self.loop_start)
            a = (f - i0)[..., None]
            r0, r1 = self.root_rot[i0], self.root_rot[i1]
            return ((1 - a) * self.root_pos[i0] + a * self.root_pos[i1], r0 + a * np.angle(np.exp(1j * (r1 - r0))),
                    (1 - a) * self.dofs[i0] + a * self.dofs[i1])
        f = t * self.fps
        cycles = np.floor(f / self.frames)
        f = f - cycles * self.frames
        i0 = np.floor(f).astype(int) % self.frames
        i1 = (i0 + 1) % self.frames
        a = (f - np.floor(f))[..., None]
        wrap = (i1 == 0)[..., None]
        drift = self.root_pos[-1] - self.root_pos[0] + (self.root_pos[-1] - self.root_pos[-2])
        drift = drift if not self.cyclic else np.zeros(3)
        p1 = self.root_pos[i1] + wrap * drift
        pos = (1 - a) * self.root_pos[i0] + a * p1 + cycles[..., None] * drift
        r0, r1 = self.root_rot[i0], self.root_rot[i1]
        rot = r0 + a * np.angle(np.exp(1j * (r1 - r0)))
        dofs = (1 - a) * self.dofs[i0] + a * self.dofs[i1]
        return pos, rot, dofs

    def meta(self) -> dict:
        return {"format": FORMAT, "id": self.id, "emotion": self.emotion, "action": self.action,
                "performer": self.performer, "take": self.take, "fps": self.fps, "intensity": self.intensity,
                "duration": self.duration, "frames": self.frames, "cyclic": self.cyclic,
                "loop_start": self.loop_start, "segments": [s.to_list() for s in self.label_segments],
                "body": asdict(self.body), "provenance": self.provenance, "dofs": [d.name for d in DOFS]}


def loop_error(m: Motion) -> tuple[float, float]:
    """Largest jump across the wrap (last frame to frame 0, or to ``loop_start`` of an evolving clip)
    relative to within-clip steps: (pose, velocity) ratios (1.0 = seamless)."""
    a = m.loop_start or 0
    x = np.concatenate([m.root_pos, m.root_rot, m.dofs], 1)
    x = np.concatenate([x, x[a:a + 1]])  # the frame after the last is the loop's first again
    vel = np.diff(x, axis=0)
    vel[:, 3:6] = np.angle(np.exp(1j * vel[:, 3:6]))  # yaw, pitch, roll wrap at +-pi
    typ = np.maximum(np.abs(vel[:-1]).max(0), 1e-6)
    acc = np.diff(np.concatenate([vel, vel[a:a + 1]]), axis=0)
    acc_typ = np.maximum(np.abs(acc[:-2]).max(0), 1e-6)
    return float((np.abs(vel[-1]) / typ).max()), float((np.abs(acc[-2:]).max(0) / acc_typ).max())


TRANSITION_WINDOW_S = 1.0  # each side of a segment boundary: covers a transition of up to 2 s
#: Speeds (per s) and accelerations (per s^2) any person reaches in everyday movement: pelvis
#: translation (m), pelvis rotation and joint angles (rad). A transition is compared with the
#: faster of these and the clip's own movement elsewhere, so that the tiny sway of a standing
#: pelvis does not make an ordinary change of posture look like a jump.
EVERYDAY = {"root_pos": (0.3, 1.5), "root_rot": (1.0, 5.0), "dofs": (2.5, 25.0)}
TRANSITION_LIMITS = (1.5, 2.5)  # (pose, velocity) ratios of transition_error a clip may reach


def transition_error(m: Motion) -> tuple[float, float]:
    """How much faster the body moves through an emotion change than elsewhere: the largest
    per-frame step (pose) and step change (velocity) within 1 s of a segment boundary over the
    larger of the largest outside and :data:`EVERYDAY`, per channel group (root position, root
    rotation, DoFs), as (pose, velocity) ratios. (0, 0) for a clip without a change."""
    if len(m.segments) < 2:
        return 0.0, 0.0
    t = np.arange(m.frames - 1) / m.fps
    near = np.zeros(len(t), bool)
    for s in m.segments[1:]:
        near |= np.abs(t - s.start) <= TRANSITION_WINDOW_S
    if near.all():
        return 0.0, 0.0
    dt = 1.0 / m.fps
    out = (0.0, 0.0)
    for name, arr in (("root_pos", m.root_pos), ("root_rot", m.root_rot), ("dofs", m.dofs)):
        vel = np.diff(arr, axis=0)
        vel = np.angle(np.exp(1j * vel)) if name == "root_rot" else vel
        acc = np.abs(np.diff(vel, axis=0))
        vel = np.abs(vel)
        v_floor, a_floor = EVERYDAY[name]
        r = ((vel[near].max(0) / np.maximum(vel[~near].max(0), v_floor * dt)).max(),
             (acc[near[1:]].max(0) / np.maximum(acc[~near[1:]].max(0), a_floor * dt * dt)).max())
        out = (max(out[0], float(r[0])), max(out[1], float(r[1])))
    return out


def save_motion(m: Motion, path: Path) -> None:
    """Write ``m`` to ``path`` (.npz) atomically: a killed write never leaves a partial file."""
    m.validate()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npz.tmp")
    os.close(fd)
    try:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, root_pos=m.root_pos.astype(np.float32), root_rot=m.root_rot.astype(np.float32),
                                dofs=m.dofs.astype(np.float32), vad=m.frame_vad.astype(np.float32),
                                meta=np.array(json.dumps(m.meta())))
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _array_shapes(path: Path) -> dict[str, tuple[tuple[int, ...], int]]:
    """Shape and size in bytes of every array of an ``.npz`` file, from their headers (none is loaded)."""
    shapes = {}
    with zipfile.ZipFile(path) as zf:
        for name in zf.namelist():
            with zf.open(name) as f:
                version = np.lib.format.read_magic(f)
                read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                shape, _fortran, dtype = read(f)
                shapes[name.removesuffix(".npy")] = (shape, int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
    return shapes


def check_clip_limits(path: Path) -> None:
    """Refuse a clip file that is not a regular file, is larger than :data:`MAX_CLIP_FILE_BYTES`, or whose
    array headers exceed :data:`MAX_FRAMES` / :data:`MAX_CLIP_BYTES`, before any array is read."""
    where = str(path)
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            raise InvalidInput("path", where, "a regular motion file")
        if st.st_size > MAX_CLIP_FILE_BYTES:
            raise InvalidInput("file size", f"{st.st_size} bytes", f"at most {MAX_CLIP_FILE_BYTES} bytes per clip",
                               where=where)
        shapes = _array_shapes(path)
    except FileNotFoundError:
        raise InvalidInput("path", where, "an existing motion file") from None
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        if isinstance(exc, InvalidInput):
            raise
        raise InvalidInput("<file>", where, f"a complete {FORMAT} .npz file ({type(exc).__name__}: {exc})") from None
    frames = max((s[0] for k, (s, _) in shapes.items() if k in ("root_pos", "root_rot", "dofs") and s), default=0)
    size = sum(n for _, n in shapes.values())
    if frames > MAX_FRAMES:
        raise InvalidInput("frames", frames, f"at most {MAX_FRAMES} frames per clip", where=where)
    if size > MAX_CLIP_BYTES:
        raise InvalidInput("arrays", f"{size} bytes", f"at most {MAX_CLIP_BYTES} bytes per clip", where=where)


def load_motion(path: Path) -> Motion:
    """Read and validate a clip; malformed or truncated files raise :class:`InvalidInput` naming the file.
    A clip over the limits is refused from its size and array headers (:func:`check_clip_limits`),
    before anything is loaded."""
    where = str(path)
    check_clip_limits(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in ("root_pos", "root_rot", "dofs", "meta")}
            arrays["vad"] = z["vad"] if "vad" in z.files else None  # clips written before VAD labels
    except FileNotFoundError:
        raise InvalidInput("path", where, "an existing motion file") from None
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise InvalidInput("<file>", where, f"a complete {FORMAT} .npz file ({type(exc).__name__}: {exc})") from None
    except KeyError as exc:
        raise InvalidInput(str(exc), None, "the array to be present", where=where) from None
    meta = parse_json(str(arrays["meta"]), "meta", where)
    if not isinstance(meta, dict):
        raise InvalidInput("meta", type(meta).__name__, "a JSON object", where=where)
    if meta.get("format") != FORMAT:
        raise InvalidInput("format", meta.get("format"), repr(FORMAT), where=where)
    if meta.get("dofs") != [d.name for d in DOFS]:
        raise InvalidInput("dofs", meta.get("dofs"), "the skeleton's DoF names in order", where=where)
    try:
        m = Motion(meta["id"], meta["emotion"], meta["action"], meta["performer"], int(meta["take"]), float(meta["fps"]),
                   arrays["root_pos"].astype(float), arrays["root_rot"].astype(float), arrays["dofs"].astype(float),
                   BodyShape(**meta["body"]), float(meta["intensity"]), meta.get("provenance", {}),
                   bool(meta.get("cyclic", True)), None if arrays["vad"] is None else arrays["vad"].astype(float),
                   _segments(meta, where), meta.get("loop_start"))
    except KeyError as exc:
        raise InvalidInput(f"meta.{exc.args[0]}", None, "a value (field is required)", where=where) from None
    except TypeError as exc:
        raise InvalidInput("meta.body", meta.get("body"), f"BodyShape fields ({exc})", where=where) from None
    return m.validate(where)


def _segments(meta: dict, where: str) -> tuple[Segment, ...]:
    """The stored segments of an evolving clip (more than one), else () (the label holds throughout)."""
    raw = meta.get("segments")
    segs = () if raw is None else parse_segments(raw, None, where)  # coverage: checked by Motion.validate
    return segs if len(segs) > 1 else ()

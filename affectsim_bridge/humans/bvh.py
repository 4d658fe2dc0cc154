"""BVH export and import with retargeting onto the avatar (real data path: KDAE, Emilya).

Export writes the avatar's own skeleton: one BVH joint per skeleton joint, channels in
the DoF order with signs folded in (``Xrotation`` etc. in degrees), offsets in the
clip's body shape (centimetres), ``End Site`` for head top, hands and toes. The file is
z-up like the project (importers that assume y-up show it lying down; ``import`` takes
``up='y'`` for such files).

Import parses any BVH hierarchy, computes its joint positions per frame, maps source
joints to avatar joints (``joint_map``), scales to the avatar's height, and solves the
avatar's root pose and DoFs per frame by bounded least squares on those positions
(warm-started from the previous frame). Unknown joint names in the map, malformed or
truncated files, and unknown labels raise :class:`InvalidInput` naming file and field.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from affectsim_bridge.humans.body import BodyShape
from affectsim_bridge.humans.motion import Motion
from affectsim_bridge.humans.skeleton import (
    DOF_HI,
    DOF_LO,
    DOFS,
    JOINTS,
    PELVIS_HEIGHT,
    POINTS,
    SITES,
    axis_rotations,
    forward_kinematics,
)
from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import EMOTIONS
from affectsim_core.readers import read_json, read_text

CM = 100.0
MAX_BVH_BYTES = 128 * 2 ** 20  # one BVH file (60,000 frames of ~60 channels: ~40 MB of text)
MAX_JOINT_MAP_BYTES = 2 ** 20  # a --joint-map file (a few dozen names)
_AXIS_NAME = {0: "X", 1: "Y", 2: "Z"}
END_SITES = {"head": "head_top", "wrist_l": "hand_l", "wrist_r": "hand_r", "ankle_l": "toe_l", "ankle_r": "toe_r"}
# common BVH joint names (Mixamo/CMU/KDAE-style) -> avatar points
DEFAULT_JOINT_MAP = {
    "Hips": "pelvis", "Spine": "spine_lower", "Spine1": "spine_upper", "Chest": "spine_upper", "Neck": "neck",
    "Head": "head", "LeftArm": "shoulder_l", "LeftForeArm": "elbow_l", "LeftHand": "wrist_l",
    "RightArm": "shoulder_r", "RightForeArm": "elbow_r", "RightHand": "wrist_r", "LeftUpLeg": "hip_l",
    "LeftLeg": "knee_l", "LeftFoot": "ankle_l", "RightUpLeg": "hip_r", "RightLeg": "knee_r", "RightFoot": "ankle_r",
}
KDAE_LABELS = {"A": "angry", "F": "fearful", "H": "happy", "N": "neutral", "SA": "sad"}  # D, SU are not used
KDAE_NAME = re.compile(r"^(?P<sex>[FM])(?P<actor>\d+)(?P<emotion>SA|SU|A|D|F|H|N)(?P<scenario>\d+)V(?P<take>\d+)")


# ------------------------------------------------------------------------------ export


def _dof_channels(joint) -> list[tuple[str, float]]:
    out = []
    for d in joint.dofs:
        k = int(np.argmax(np.abs(d.axis)))
        out.append((f"{_AXIS_NAME[k]}rotation", float(np.sign(d.axis[k]))))
    return out


def export_bvh(m: Motion, path: Path) -> None:
    """Write ``m`` as BVH (z-up, centimetres, degrees), atomically."""
    offsets = m.body.joint_offsets()
    children: dict[str, list] = {}
    for j in JOINTS:
        children.setdefault(j.parent, []).append(j)
    lines = ["HIERARCHY"]
    dfs: list = []  # channel data follow the hierarchy's depth-first order, not JOINTS order

    def emit(j, depth: int) -> None:
        dfs.append(j)
        pad = "  " * depth
        off = np.zeros(3) if j.parent is None else offsets[j.name] * CM
        lines.append(f"{pad}{'ROOT' if j.parent is None else 'JOINT'} {j.name}")
        lines.append(f"{pad}{{")
        lines.append(f"{pad}  OFFSET {off[0]:.6f} {off[1]:.6f} {off[2]:.6f}")
        if j.parent is None:
            lines.append(f"{pad}  CHANNELS 6 Xposition Yposition Zposition Zrotation Yrotation Xrotation")
        else:
            ch = _dof_channels(j)
            lines.append(f"{pad}  CHANNELS {len(ch)} " + " ".join(c for c, _ in ch))
        for c in children.get(j.name, []):
            emit(c, depth + 1)
        if j.name in END_SITES:
            site_off = np.asarray(SITES[END_SITES[j.name]][1]) * m.body.height * CM
            lines.extend([f"{pad}  End Site", f"{pad}  {{", f"{pad}    OFFSET {site_off[0]:.6f} {site_off[1]:.6f} "
                          f"{site_off[2]:.6f}", f"{pad}  }}"])
        lines.append(f"{pad}}}")

    emit(JOINTS[0], 0)
    first = {}
    k = 0
    for j in JOINTS:
        first[j.name] = k
        k += len(j.dofs)
    cols = [first[j.name] + i for j in dfs[1:] for i in range(len(j.dofs))]
    signs = np.array([s for j in dfs[1:] for _, s in _dof_channels(j)])
    rows = np.concatenate([m.root_pos * CM, np.degrees(m.root_rot), np.degrees(m.dofs[:, cols] * signs)], axis=1)
    lines += ["MOTION", f"Frames: {m.frames}", f"Frame Time: {1.0 / m.fps:.8f}"]
    lines += [" ".join(f"{v:.6f}" for v in row) for row in rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".bvh.tmp")
    with os.fdopen(fd, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


# ------------------------------------------------------------------------------ parsing


@dataclass
class BvhJoint:
    name: str
    parent: int
    offset: np.ndarray
    channels: list[str] = field(default_factory=list)
    end_offset: np.ndarray | None = None


@dataclass
class Bvh:
    joints: list[BvhJoint]
    frame_time: float
    data: np.ndarray  # (T, channels)

    def positions(self, up: str = "z") -> dict[str, np.ndarray]:
        """Global positions (T, 3) in the file's units of every joint and of ``<joint>.end`` sites, z-up."""
        T = len(self.data)
        rot = [None] * len(self.joints)
        pos: dict[str, np.ndarray] = {}
        col = 0
        for i, j in enumerate(self.joints):
            local_t = np.tile(j.offset, (T, 1))
            r = np.tile(np.eye(3), (T, 1, 1))
            for ch in j.channels:
                v = self.data[:, col]
                col += 1
                axis = {"X": 0, "Y": 1, "Z": 2}[ch[0]]
                if ch.endswith("position"):
                    local_t[:, axis] = v if j.parent < 0 else local_t[:, axis] + v
                else:
                    r = r @ axis_rotations(np.eye(3)[axis], np.radians(v))
            if j.parent < 0:
                p, R = local_t, r
            else:
                pr = rot[j.parent]
                p = pos[self.joints[j.parent].name] + np.einsum("tij,tj->ti", pr, local_t)
                R = pr @ r
            rot[i] = R
            pos[j.name] = p
            if j.end_offset is not None:
                pos[f"{j.name}.end"] = p + np.einsum("tij,j->ti", R, j.end_offset)
        if up == "y":  # y-up (x right, y up, z forward) -> z-up (x forward, y left, z up)
            pos = {k: np.stack([v[:, 2], v[:, 0], v[:, 1]], 1) for k, v in pos.items()}
        return pos


def read_joint_map(path: Path) -> dict[str, str]:
    """A ``--joint-map`` file: a JSON object {source joint: avatar point}, refused naming the file otherwise."""
    jm = read_json(Path(path), MAX_JOINT_MAP_BYTES, "--joint-map")
    if not (isinstance(jm, dict) and all(isinstance(v, str) for v in jm.values())):
        raise InvalidInput("--joint-map", str(path), "a JSON object {source joint: avatar point}")
    return jm


def parse_bvh(path: Path) -> Bvh:
    where = str(path)
    tokens = read_text(Path(path), MAX_BVH_BYTES, "BVH file").split()
    it = iter(enumerate(tokens))
    joints: list[BvhJoint] = []
    stack: list[int] = []

    def nxt(expect: str | None = None) -> str:
        try:
            _, tok = next(it)
        except StopIteration:
            raise InvalidInput("<file>", where, "a complete BVH file (ended early: truncated?)") from None
        if expect is not None and tok != expect:
            raise InvalidInput("hierarchy", tok, f"{expect!r}", where=where)
        return tok

    def num() -> float:
        tok = nxt()
        try:
            return float(tok)
        except ValueError:
            raise InvalidInput("number", tok, "a number", where=where) from None

    nxt("HIERARCHY")
    last = -1
    while True:
        tok = nxt()
        if tok in ("ROOT", "JOINT"):
            name = nxt()
            nxt("{")
            nxt("OFFSET")
            off = np.array([num(), num(), num()])
            nxt("CHANNELS")
            n = int(num())
            chans = [nxt() for _ in range(n)]
            for c in chans:
                if c not in ("Xposition", "Yposition", "Zposition", "Xrotation", "Yrotation", "Zrotation"):
                    raise InvalidInput(f"joint {name} channel", c, "X/Y/Z position or rotation", where=where)
            joints.append(BvhJoint(name, stack[-1] if stack else -1, off, chans))
            stack.append(len(joints) - 1)
        elif tok == "End":
            nxt("Site")
            nxt("{")
            nxt("OFFSET")
            joints[stack[-1]].end_offset = np.array([num(), num(), num()])
            nxt("}")
        elif tok == "}":
            if not stack:
                raise InvalidInput("hierarchy", "}", "balanced braces", where=where)
            stack.pop()
        elif tok == "MOTION":
            break
        else:
            raise InvalidInput("hierarchy", tok, "ROOT, JOINT, End Site or }", where=where)
        last = len(joints)
    if stack or not joints or last < 1:
        raise InvalidInput("hierarchy", f"{len(stack)} unclosed joints", "a closed joint hierarchy", where=where)
    nxt("Frames:")
    frames = int(num())
    nxt("Frame")
    nxt("Time:")
    ft = num()
    nch = sum(len(j.channels) for j in joints)
    rest = [t for _, t in it]
    if len(rest) < frames * nch:
        raise InvalidInput("MOTION", f"{len(rest)} values", f"{frames} frames x {nch} channels (truncated?)",
                           where=where)
    try:
        data = np.array(rest[: frames * nch], float).reshape(frames, nch)
    except ValueError:
        raise InvalidInput("MOTION", "non-numeric values", "numbers", where=where) from None
    if not (0 < ft < 1) or not np.isfinite(data).all():
        raise InvalidInput("Frame Time", ft, "a frame time in (0, 1) s and finite channel values", where=where)
    return Bvh(joints, ft, data)


# ------------------------------------------------------------------------------ import


def label_from_name(path: Path, label_map: dict[str, str] | None = None) -> str | None:
    """Emotion label from a KDAE-style file name (``F01A0V1.bvh``); None for codes outside the five classes."""
    m = KDAE_NAME.match(Path(path).stem)
    if not m:
        raise InvalidInput("file name", Path(path).name, "a KDAE name like F01A0V1.bvh (or pass --emotion)")
    code = m.group("emotion")
    return (label_map or KDAE_LABELS).get(code)


def _kabsch(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Rotations (T, 3, 3) best mapping vectors ``src`` (K, 3) onto ``dst`` (T, K, 3)."""
    h = np.einsum("ki,tkj->tij", src, dst)
    u, _, vt = np.linalg.svd(h)
    d = np.sign(np.linalg.det(np.einsum("tij,tjk->tik", u, vt).transpose(0, 2, 1)))
    fix = np.tile(np.eye(3), (len(h), 1, 1))
    fix[:, 2, 2] = d
    return np.einsum("tji,tjk,tlk->til", vt, fix, u)


def _ypr(r: np.ndarray) -> np.ndarray:
    """(T, 3, 3) = Rz(yaw) Ry(pitch) Rx(roll) -> (T, 3) yaw, pitch, roll."""
    pitch = np.arcsin(np.clip(-r[:, 2, 0], -1, 1))
    return np.stack([np.arctan2(r[:, 1, 0], r[:, 0, 0]), pitch, np.arctan2(r[:, 2, 1], r[:, 2, 2])], 1)


def retarget(bvh: Bvh, joint_map: dict[str, str], where: str, up: str = "z", units: float = 0.01,
             height: float | None = None, sweeps: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray, BodyShape]:
    """Avatar root pose and DoFs reproducing the BVH's mapped joint positions.

    Root: position of the mapped pelvis, orientation by Kabsch on the pelvis -> hips and spine
    vectors. Then, joint by joint from the root, the joint's DoFs are fitted (batched
    Gauss-Newton over all frames, within joint limits) so that its mapped children and
    grandchildren land on their targets; a few sweeps settle twists that only
    grandchildren reveal.
    """
    names = {j.name for j in bvh.joints} | {f"{j.name}.end" for j in bvh.joints if j.end_offset is not None}
    for src, dst in joint_map.items():
        if src not in names:
            raise InvalidInput("joint_map source joint", src, f"a joint of the file ({', '.join(sorted(names))})",
                               where=where)
        if dst not in POINTS:
            raise InvalidInput("joint_map target", dst, f"an avatar point ({', '.join(POINTS)})", where=where)
    need = {"pelvis", "hip_l", "hip_r", "spine_lower"}
    if not need <= set(joint_map.values()):
        raise InvalidInput("joint_map", sorted(joint_map.values()), f"source joints mapped to {sorted(need)}",
                           where=where)
    pos = {k: v * units for k, v in bvh.positions(up).items()}
    target = {dst: pos[src] for src, dst in joint_map.items()}
    if height is None:  # standing height from the first frame, head top (or head) to the floor
        top = target.get("head_top", target.get("head"))
        height = float((top[0, 2] - min(v[0, 2] for v in target.values())) * (1.0 if "head_top" in target else 1.08))
    body = BodyShape(height=float(np.clip(height, 1.45, 2.0)))
    offsets = body.joint_offsets()
    T = len(target["pelvis"])
    root_pos = target["pelvis"].copy()
    rest = np.stack([offsets[n] for n in ("hip_l", "hip_r", "spine_lower")])
    cur = np.stack([target[n] - root_pos for n in ("hip_l", "hip_r", "spine_lower")], 1)
    root_rot = _ypr(_kabsch(rest, cur))
    q = np.zeros((T, len(DOFS)))
    idx = {p: POINTS.index(p) for p in target}
    order, start = [], 0
    for j in JOINTS:
        order.append((j, list(range(start, start + len(j.dofs)))))
        start += len(j.dofs)

    def descendants(name: str, depth: int = 2) -> list[str]:
        kids = [c.name for c in JOINTS if c.parent == name] + [s for s, (par, _) in SITES.items() if par == name]
        out = list(kids)
        if depth > 1:
            for k in kids:
                if k in {jj.name for jj in JOINTS}:
                    out += descendants(k, depth - 1)
        return out

    def gauss_newton(cols: list[int], watch: list[str], iters: int) -> None:
        """Damped, step-limited Gauss-Newton on DoF columns ``cols``, every frame at once."""
        tgt = np.stack([target[p] for p in watch], 1)
        wi = [idx[p] for p in watch]

        def residual(qq: np.ndarray) -> np.ndarray:
            pts, _ = forward_kinematics(body.height, root_pos, root_rot, qq, offsets)
            return (pts[:, wi] - tgt).reshape(T, -1)

        for _ in range(iters):
            r0 = residual(q)
            jac = np.zeros((T, r0.shape[1], len(cols)))
            for k, c in enumerate(cols):
                qq = q.copy()
                qq[:, c] += 1e-5
                jac[:, :, k] = (residual(qq) - r0) / 1e-5
            jtj = np.einsum("tmi,tmj->tij", jac, jac)
            jtj += (1e-6 + 1e-4 * np.trace(jtj, axis1=1, axis2=2))[:, None, None] * np.eye(len(cols))
            step = np.linalg.solve(jtj, -np.einsum("tmi,tm->ti", jac, r0)[..., None])[..., 0]
            step *= np.minimum(1.0, 0.3 / (np.abs(step).max(1, keepdims=True) + 1e-12))
            q[:, cols] = np.clip(q[:, cols] + step, DOF_LO[cols], DOF_HI[cols])
            if np.abs(step).max() < 1e-7:
                break

    for _ in range(sweeps):  # joint by joint from the root: a good start, free of bad local minima
        for j, cols in order:
            watch = [p for p in descendants(j.name) if p in target]
            if cols and watch:
                gauss_newton(cols, watch, 20)
    gauss_newton(list(range(len(DOFS))), list(target), 15)  # then all DoFs together
    return root_pos, root_rot, q, body


def import_bvh(path: Path, emotion: str, action: str, performer: str, take: int = 1, up: str = "y",
               units: float = 0.01, joint_map: dict[str, str] | None = None, height: float | None = None,
               cyclic: bool = False, mid: str | None = None) -> Motion:
    """Read a BVH file and return a validated avatar :class:`Motion` with provenance."""
    where = str(path)
    if emotion not in EMOTIONS:
        raise InvalidInput("emotion", emotion, f"one of {', '.join(EMOTIONS)}", where=where)
    bvh = parse_bvh(Path(path))
    jm = joint_map or {k: v for k, v in DEFAULT_JOINT_MAP.items() if k in {j.name for j in bvh.joints}}
    pos, rot, q, body = retarget(bvh, jm, where, up=up, units=units, height=height)
    mid = mid or f"bvh_{Path(path).stem}"
    prov = {"source": Path(path).name, "importer": "affectsim bvh v1", "joint_map": jm, "up": up, "units": units}
    return Motion(mid, emotion, action, performer, take, 1.0 / bvh.frame_time, pos, rot, q, body, 1.0, prov,
                  cyclic).validate(where)


def own_joint_map() -> dict[str, str]:
    """Map for files written by :func:`export_bvh` (every joint and end site)."""
    jm = {j.name: j.name for j in JOINTS}
    jm.update({f"{j}.end": site for j, site in END_SITES.items()})
    return jm


__all__ = ["export_bvh", "import_bvh", "parse_bvh", "retarget", "label_from_name", "own_joint_map",
           "DEFAULT_JOINT_MAP", "KDAE_LABELS", "PELVIS_HEIGHT"]

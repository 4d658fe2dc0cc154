"""Library validation (``affectsim motions validate``): every clip checked, failures counted by reason.

Checks and thresholds (clip frame, metres, height H):
- manifest: files present, SHA-256 matches, ids unique, labels valid, every clip loads;
- joint limits: every DoF within the skeleton's range (+0.5 deg);
- loop continuity: the step across the wrap <= 1.5x the largest in-clip step (pose), and its
  velocity change <= 2.5x the largest in-clip one (a heel-strike peak may fall on the wrap; a
  real discontinuity gives ratios of 10 and more); for an evolving clip the wrap is from its
  last frame to its held cycle's first;
- transition continuity (evolving clips): within 1 s of an emotion change no step exceeds 1.5x,
  and no step change 2.5x, the largest elsewhere in the clip (per channel group);
- labels: per-frame VAD in [-1, 1], segments contiguous over the clip, ending in its label; over
  the library, at least 30 % of the variance of the clips' arousal and of their dominance lies
  within their emotion classes (:func:`vad_within_class_share`);
- foot sliding: while a foot is planted (ankle within 1.5 cm of its standing height and
  slower than 0.25 m/s vertically) its horizontal speed averages < 0.05 m/s;
- self-penetration: hands stay outside the torso core (distance to the spine axis
  > 0.035 H) and the ankle centres stay > 0.035 H apart (feet are 0.048 H wide);
- seated: while seated the pelvis is 0.03-0.09 H above the support height;
- knocking: the right hand reaches the door plane (within 1 cm) at least once per cycle
  and never passes it by more than 1 cm.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from affectsim_bridge.humans.generator import ANKLE_H
from affectsim_bridge.content.library import Library
from affectsim_bridge.humans.motion import TRANSITION_LIMITS, Motion, loop_error, transition_error
from affectsim_bridge.humans.skeleton import DOF_HI, DOF_LO, DOFS, JOINT_INDEX, POINTS, forward_kinematics
from affectsim_core.affect import VAD_DIMENSIONS
from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import EMOTIONS

SLIDE_MAX = 0.05  # m/s, mean horizontal speed of a planted foot
#: least share of the clips' arousal and dominance variance within their classes: a VAD label must
#: carry information of its own beyond the class (issue 27; 0.04-0.05 when VAD was the class prototype)
MIN_VAD_WITHIN = 0.30


@dataclass
class Report:
    checked: int = 0
    failures: Counter = field(default_factory=Counter)
    examples: dict = field(default_factory=dict)
    measures: dict = field(default_factory=dict)

    def fail(self, clip: str, reason: str, detail: str) -> None:
        self.failures[reason] += 1
        self.examples.setdefault(reason, f"{clip}: {detail}")

    @property
    def ok(self) -> bool:
        return not self.failures


def check_motion(m: Motion, report: Report, door_plane_x: float | None = None) -> None:
    H = m.body.height
    pts, _ = forward_kinematics(H, m.root_pos, m.root_rot, m.dofs, m.body.joint_offsets())
    tol = np.radians(0.5)
    bad = (m.dofs < DOF_LO - tol) | (m.dofs > DOF_HI + tol)
    if bad.any():
        j = int(np.argmax(bad.any(0)))
        report.fail(m.id, "joint_limits", f"{DOFS[j].name} outside [{DOF_LO[j]:.2f}, {DOF_HI[j]:.2f}] rad")
    pose_jump, vel_jump = loop_error(m)
    if (m.cyclic or m.loop_start is not None) and (pose_jump > 1.5 or vel_jump > 2.5):
        report.fail(m.id, "loop_continuity", f"wrap jump {pose_jump:.2f}x (pose), {vel_jump:.2f}x (velocity)")
    pose_tr, vel_tr = transition_error(m)
    report.measures.setdefault("transition_ratio", []).append((pose_tr, vel_tr))
    if pose_tr > TRANSITION_LIMITS[0] or vel_tr > TRANSITION_LIMITS[1]:
        report.fail(m.id, "transition_continuity", f"through an emotion change {pose_tr:.2f}x (pose), "
                    f"{vel_tr:.2f}x (velocity) the largest elsewhere")
    dt = 1.0 / m.fps
    slides = []
    for s in ("l", "r"):
        a = pts[:, POINTS.index(f"ankle_{s}")]
        v = np.diff(np.concatenate([a, a[:1]]), axis=0) / dt
        planted = (a[:, 2] < ANKLE_H * H + 0.015) & (np.abs(v[:, 2]) < 0.25)
        if m.action == "seated" or m.action == "sit_down":
            planted = a[:, 2] < ANKLE_H * H + 0.015
        if planted.any():
            slides.append(float(np.linalg.norm(v[planted, :2], axis=1).mean()))
    slide = max(slides) if slides else 0.0
    report.measures.setdefault("foot_slide", []).append(slide)
    if slide > SLIDE_MAX:
        report.fail(m.id, "foot_sliding", f"planted foot moves {slide:.3f} m/s (max {SLIDE_MAX})")
    spine_a, spine_b = pts[:, JOINT_INDEX["spine_lower"]], pts[:, JOINT_INDEX["neck"]]
    for s in ("l", "r"):
        hand = pts[:, POINTS.index(f"hand_{s}")]
        ab = spine_b - spine_a
        u = np.clip(np.einsum("ti,ti->t", hand - spine_a, ab) / np.einsum("ti,ti->t", ab, ab), 0, 1)
        d = np.linalg.norm(hand - (spine_a + u[:, None] * ab), axis=1)
        if d.min() < 0.035 * H:
            report.fail(m.id, "self_penetration", f"hand_{s} {d.min():.3f} m from the spine axis")
    gap = np.linalg.norm(pts[:, POINTS.index("ankle_l")] - pts[:, POINTS.index("ankle_r")], axis=1).min()
    if gap < 0.035 * H:
        report.fail(m.id, "self_penetration", f"ankles {gap:.3f} m apart")
    if m.action in ("seated", "sit_down"):
        seat = float(m.provenance.get("seat_height", np.nan))
        z = m.root_pos[:, 2] - seat
        seated = z < z.min() + 0.01  # the seated hold
        if not seated.any():
            report.fail(m.id, "seated_height", "never reaches the support")
        elif z[seated].min() < 0.03 * H or z[seated].max() > 0.09 * H:
            report.fail(m.id, "seated_height", f"pelvis {z[seated].min():.3f}..{z[seated].max():.3f} m above the seat")
    if m.action == "knock":
        plane = float(m.provenance.get("door_plane_x", np.nan)) if door_plane_x is None else door_plane_x
        hx = pts[:, POINTS.index("hand_r"), 0]
        if not np.isfinite(plane) or hx.max() < plane - 0.01 or hx.max() > plane + 0.01:
            report.fail(m.id, "knock_contact", f"hand reaches x={hx.max():.3f}, door plane at {plane:.3f}")


def validate_library(lib: Library, log=print) -> Report:
    report = Report()
    seen = set()
    for e in lib.manifest["clips"]:
        report.checked += 1
        if e["id"] in seen:
            report.fail(e["id"], "duplicate_id", "id appears twice in the manifest")
        seen.add(e["id"])
        if e["emotion"] not in EMOTIONS:
            report.fail(e["id"], "label", f"emotion {e['emotion']!r}")
        path = lib.root / e["file"]
        if not path.is_file():
            report.fail(e["id"], "missing_file", str(path))
            continue
        if hashlib.sha256(path.read_bytes()).hexdigest() != e["sha256"]:
            report.fail(e["id"], "checksum", f"{path} differs from the manifest")
            continue
        try:
            m = lib.load(e["id"])
        except InvalidInput as exc:
            report.fail(e["id"], "unreadable", str(exc))
            continue
        if (m.emotion, m.action, m.performer) != (e["emotion"], e["action"], e["performer"]):
            report.fail(e["id"], "metadata", "clip labels differ from the manifest")
        check_motion(m, report)
        if report.checked % 300 == 0:
            log(f"[validate] {report.checked}/{len(lib.manifest['clips'])} clips")
    for seq in lib.manifest.get("dyadic", []):
        for role in ("target", "partner"):
            if seq[role] not in lib.entries:
                report.fail(seq["id"], "dyadic", f"{role} clip {seq[role]!r} not in the library")
    shares = vad_within_class_share(lib.manifest["clips"])
    report.measures["vad_within_class_share"] = shares
    for dim in ("arousal", "dominance"):
        if shares.get(dim, 1.0) < MIN_VAD_WITHIN:
            report.fail("library", f"vad_within_class_share:{dim}",
                        f"{shares[dim]:.3f} of the variance within classes, expected >= {MIN_VAD_WITHIN}")
    return report


def vad_within_class_share(entries: list[dict]) -> dict[str, float]:
    """VAD dimension -> the share of the variance of the clips' mean VAD that lies within their
    emotion classes (1 - between-class share); empty with fewer than two clips."""
    vad = np.array([e["vad"] for e in entries if "vad" in e], float).reshape(-1, 3)
    labels = np.array([e["emotion"] for e in entries if "vad" in e])
    if len(vad) < 2:
        return {}
    out = {}
    for k, dim in enumerate(VAD_DIMENSIONS):
        total = float(vad[:, k].var())
        within = sum(float(vad[labels == c, k].var()) * int((labels == c).sum()) for c in set(labels)) / len(vad)
        out[dim] = round(within / total, 4) if total > 0 else 1.0
    return out

"""Sensor and actuation noise models of the simulated Fetch, seeded per episode and all off by default.

Each model is a small class registered by name in :data:`NOISE_MODELS`; its parameters are declared
once in its ``PARAMS`` (default, inclusive bounds, unit), checked when it is built, and become the bridge
parameters ``noise_<model>_<param>`` plus one ``noise_<model>_enabled`` flag (``config/bench.yaml``).
Every model draws from its own ``numpy.random.Generator`` derived from (episode seed, model name), so the
models are independent of each other and the same seed gives the same noise. A disabled model is not
built: its input comes back unchanged (the same object), so with everything off the published data are
bit-identical to the noise-free simulator. ROS-free (numpy only); the bridge node is the adapter.

Each model perturbs one *stream* of the bridge's data (its ``stream``, one of :data:`STREAMS`) through
that stream's method; the bridge applies every enabled model of a stream, in registration order, so a
plugin model (``docs/extending.md``) is used by registering it.

Models (details in each class and in ``docs/noise.md``):

=============  ==============================================================================
``depth``      structured-light depth: sigma_z = k z^2, disparity quantisation, missing pixels at edges
``rgb``        motion blur from the camera's angular velocity, then Gaussian read + shot noise (uint8)
``laser``      Gaussian range noise (sigma 0.02 m, the Fetch Gazebo model), dropouts, range limits
``odometry``   odom -> base_link dead-reckoning drift proportional to distance travelled and angle turned
``actuation``  realised translation and rotation of each primitive action: multiplicative + additive error
``latency``    camera frames delivered ``delay_s`` (+ jitter) after capture, keeping their capture stamp
=============  ==============================================================================

Units: metres, radians, seconds of sim time, pixels, image levels (DN, 0..255). Frames: depth images
are along the optical axis of ``head_camera_rgb_optical_frame`` (z forward, x right, y down); odometry
poses are in ``odom``; actions are in ``base_link`` (x forward).
"""

from __future__ import annotations

import math
import zlib
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from affectsim_core.errors import InvalidInput
from affectsim_core.geometry import Pose2D, wrap_angle
from affectsim_core.registry import Registry

CONFIG_PREFIX = "noise_"  # bridge parameters of the noise models: noise_<model>_<param>, noise_<model>_enabled
ENABLED = "enabled"
SEED_KEY = "noise_seed"  # the seed parameter, not a model's

#: The data a noise model can perturb -> the method the bridge calls on a model of that stream.
STREAMS: dict[str, str] = {
    "depth": "apply(depth (H, W) float32 m, fx px) -> depth",
    "rgb": "apply(rgb (H, W, 3) uint8, omega (3,) rad/s optical frame, fx px, fy px) -> rgb",
    "laser": "apply(ranges (N,) m, range_min m, range_max m) -> ranges (float32)",
    "odometry": "update(true_pose Pose2D in odom) -> estimated Pose2D",
    "actuation": "realise(translation m, rotation rad) -> (translation m, rotation rad)",
    "latency": "push(t_capture s, frame) -> delivery time s; due(t_now s) -> [(t_capture, frame)]",
}


@dataclass(frozen=True)
class NoiseParam:
    """One parameter of a noise model: ``default`` fixes the type (float or int), ``bounds`` are inclusive."""

    name: str
    default: float | int
    bounds: tuple[float, float]
    unit: str
    description: str

    def key(self, model: str) -> str:
        """The bridge parameter (and config key) naming this parameter of ``model``."""
        return f"{CONFIG_PREFIX}{model}_{self.name}"

    def check(self, model: str, value: Any) -> float | int:
        """``value`` as this parameter's type, or :class:`InvalidInput` naming ``noise_<model>_<name>``."""
        kind = "an integer" if isinstance(self.default, int) else "a number"
        expected = f"{kind} in [{self.bounds[0]:g}, {self.bounds[1]:g}] {self.unit}".rstrip()
        ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
        ok = ok and math.isfinite(float(value)) and self.bounds[0] <= float(value) <= self.bounds[1]
        if ok and isinstance(self.default, int):
            ok = float(value) == int(value)
        if not ok:
            raise InvalidInput(self.key(model), value, expected)
        return int(value) if isinstance(self.default, int) else float(value)


class NoiseModel:
    """Base class: parameters from ``PARAMS`` (checked), a generator ``rng``, per-episode state in
    :meth:`reset`. Subclasses set ``stream`` (what they perturb, a key of :data:`STREAMS`, with its
    method), ``summary`` and ``PARAMS``; ``name`` is the one they are registered under."""

    name: ClassVar[str] = ""
    stream: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    PARAMS: ClassVar[tuple[NoiseParam, ...]] = ()

    def __init__(self, rng: np.random.Generator | None = None, **params: Any) -> None:
        known = {p.name: p for p in self.PARAMS}
        for key, value in params.items():
            if key not in known:
                raise InvalidInput(f"{CONFIG_PREFIX}{self.name}_{key}", value,
                                   f"a parameter of the {self.name} noise model: {', '.join(known) or 'none'}")
        for p in self.PARAMS:
            setattr(self, p.name, p.check(self.name, params.get(p.name, p.default)))
        self.reseed(rng if rng is not None else model_rng(0, self.name))

    def reseed(self, rng: np.random.Generator) -> None:
        """Start a new episode: use ``rng`` from now on and clear the per-episode state."""
        self.rng = rng
        self.reset()

    def reset(self) -> None:
        """Clear per-episode state (draw per-episode errors); nothing by default."""

    def params(self) -> dict[str, float | int]:
        """The parameter values, by name."""
        return {p.name: getattr(self, p.name) for p in self.PARAMS}


NOISE_MODELS: Registry[NoiseModel] = Registry("noise model", name_attr="name")


def register_model(name: str):
    """Class decorator: register a :class:`NoiseModel` subclass in :data:`NOISE_MODELS` as ``name`` (its
    ``name`` attribute, the prefix of its parameters); duplicates raise ``KeyError``."""

    def decorate(cls: type[NoiseModel]) -> type[NoiseModel]:
        if not (isinstance(cls, type) and issubclass(cls, NoiseModel)):
            raise TypeError(f"noise model {name!r}: {cls!r} is not a NoiseModel subclass")
        NOISE_MODELS.register(name)(cls)  # sets cls.name
        return cls

    return decorate


def model_rng(seed: int, name: str) -> np.random.Generator:
    """The generator of model ``name`` in the episode with ``seed`` (independent of every other model's)."""
    return np.random.default_rng([int(seed), zlib.crc32(name.encode())])  # crc32: stable across processes


def model_class(name: str) -> type[NoiseModel]:
    """The class registered as ``name`` (``KeyError`` listing the known ones)."""
    cls = NOISE_MODELS.get(name)
    assert isinstance(cls, type) and issubclass(cls, NoiseModel)
    return cls


def config_params() -> list[tuple[str, bool | float | int, tuple[float, float] | None, str]]:
    """Every config key of every model as (key, default, bounds or None, description): the bridge's
    noise parameters, in registry order, each model's ``enabled`` flag (default ``False``) first."""
    out: list[tuple[str, bool | float | int, tuple[float, float] | None, str]] = []
    for name in NOISE_MODELS.names():
        cls = model_class(name)
        out.append((f"{CONFIG_PREFIX}{name}_{ENABLED}", False, None, f"noise: enable {cls.summary}"))
        out += [(p.key(name), p.default, p.bounds, f"noise {name}: {p.description} ({p.unit})" if p.unit
                 else f"noise {name}: {p.description}") for p in cls.PARAMS]
    return out


# ---------------------------------------------------------------------------------------------- models
@register_model("depth")
class DepthNoise(NoiseModel):
    """Structured-light depth (the Fetch's Primesense Carmine 1.09; Kinect v1 alike).

    Applied to a depth image in metres along the optical axis (NaN = no return), in this order:

    1. *Missing pixels at depth edges*: a pixel is on an edge where a 4-neighbour's depth differs by more
       than ``edge_jump`` x its depth, or the neighbour has no depth; pixels within ``edge_width_px`` of an
       edge are lost (NaN) with probability ``edge_dropout`` (projector shadows and unmatched speckle along
       occlusion boundaries; the real shadow lies on one side of the foreground, this model is symmetric).
       Any other pixel is lost with probability ``dropout``.
    2. *Random error* growing with the square of the distance: z + N(0, (sigma_k z^2)^2), the axial model
       of Khoshelham & Oude Elberink (2012, Sensors 12:1437; about 4 cm at 5 m, k = 0.0016 1/m) and
       Nguyen, Izadi & Lovell (2012, 3DIMPVT; 0.0012 + 0.0019 (z - 0.4)^2 m).
    3. *Disparity quantisation*: depth comes from disparity d = fx b / z (px) measured in steps of
       ``disparity_step_px`` (1/8 px on the Kinect/Primesense), so z takes the values fx b / (n step):
       steps of about z^2 step / (fx b) metres (2.7 cm at 3 m with the defaults and fx = 554 px).

    ``sigma_k = 0`` and ``disparity_step_px = 0`` turn 2 and 3 off.
    """

    stream = "depth"
    summary = "structured-light depth noise (sigma_z = k z^2, disparity quantisation, edge dropouts)"
    PARAMS = (
        NoiseParam("sigma_k", 0.0016, (0.0, 0.05), "1/m", "sigma of the depth error per squared metre of depth"),
        NoiseParam("baseline_m", 0.075, (0.01, 0.5), "m", "projector-camera baseline of the disparity"),
        NoiseParam("disparity_step_px", 0.125, (0.0, 2.0), "px", "disparity quantisation step; 0 = none"),
        NoiseParam("edge_jump", 0.05, (0.001, 1.0), "", "depth jump that makes an edge, as a fraction of depth"),
        NoiseParam("edge_width_px", 2, (0, 16), "px", "half-width of the band around depth edges"),
        NoiseParam("edge_dropout", 0.5, (0.0, 1.0), "", "probability that a pixel of the edge band is lost"),
        NoiseParam("dropout", 0.0, (0.0, 1.0), "", "probability that any other pixel is lost"),
    )
    sigma_k: float
    baseline_m: float
    disparity_step_px: float
    edge_jump: float
    edge_width_px: int
    edge_dropout: float
    dropout: float

    def edge_band(self, depth: np.ndarray) -> np.ndarray:
        """(H, W) bool: pixels within ``edge_width_px`` of a depth edge of ``depth`` (metres)."""
        z = np.asarray(depth, dtype=np.float64)
        valid = np.isfinite(z)
        edge = np.zeros(z.shape, dtype=bool)
        for axis in (0, 1):
            a, b = np.swapaxes(z, 0, axis), np.swapaxes(valid, 0, axis)
            za, zb, va, vb = a[:-1], a[1:], b[:-1], b[1:]
            with np.errstate(invalid="ignore"):
                jump = (va != vb) | (va & vb & (np.abs(za - zb) > self.edge_jump * np.minimum(za, zb)))
            e = np.swapaxes(edge, 0, axis)  # a view: writes reach ``edge``
            e[:-1] |= jump
            e[1:] |= jump
        edge &= valid  # only pixels with a depth can be lost
        r = self.edge_width_px
        if r > 0:  # dilate by a (2r+1)^2 square
            padded = np.pad(edge, r)
            rows = np.zeros_like(padded)
            for i in range(2 * r + 1):
                rows[r:-r] |= padded[i:i + padded.shape[0] - 2 * r]
            band = np.zeros(edge.shape, dtype=bool)
            for j in range(2 * r + 1):
                band |= rows[r:-r, j:j + edge.shape[1]]
            edge = band & valid
        return edge

    def apply(self, depth: np.ndarray, fx: float) -> np.ndarray:
        """Noisy copy of ``depth`` ((H, W) float32 metres, NaN = no return) from a camera of focal length
        ``fx`` (px); lost pixels become NaN."""
        if not (math.isfinite(fx) and fx > 0):
            raise InvalidInput("fx", fx, "a focal length > 0 px")
        z = np.array(depth, dtype=np.float64)
        valid = np.isfinite(z)
        band = self.edge_band(z)
        u = self.rng.random(z.shape)
        lost = np.where(band, u < self.edge_dropout, u < self.dropout) & valid
        n = self.rng.standard_normal(z.shape)
        with np.errstate(invalid="ignore"):
            z = z + self.sigma_k * z * z * n
            if self.disparity_step_px > 0:
                fb = fx * self.baseline_m
                steps = np.maximum(np.round(fb / (z * self.disparity_step_px)), 1.0)
                z = fb / (steps * self.disparity_step_px)
            lost |= valid & ~(z > 0)
        z[lost] = np.nan
        return z.astype(np.float32)


@register_model("rgb")
class RgbNoise(NoiseModel):
    """Colour camera: motion blur from the camera's rotation during the exposure, then sensor noise.

    *Blur*: a camera turning at angular velocity omega (rad/s, in the optical frame) smears the image
    during the exposure ``exposure_s``: rotation about the optical y axis (pan; the base turning) shifts
    it horizontally by omega_y exposure fx px, about x (tilt) vertically by omega_x exposure fy px. Each
    is a box filter of that length, centred (the frame shows the mid-exposure view); rotation about the
    optical axis (roll) and translation blur (which depends on depth) are not modelled.
    *Noise*: Gaussian with variance ``read_sigma``^2 + ``shot_gain`` x I per channel (I the blurred level,
    0..255; the shot-noise variance of a photon-counting sensor grows with the signal), rounded and clipped
    to uint8.
    """

    stream = "rgb"
    summary = "RGB sensor noise (read + shot) and motion blur from the camera's angular velocity"
    PARAMS = (
        NoiseParam("read_sigma", 2.0, (0.0, 50.0), "DN", "sigma of the signal-independent (read) noise"),
        NoiseParam("shot_gain", 0.1, (0.0, 10.0), "DN", "shot-noise variance per level of signal"),
        NoiseParam("exposure_s", 0.015, (0.0, 0.1), "s", "exposure time of the motion blur; 0 = no blur"),
    )
    read_sigma: float
    shot_gain: float
    exposure_s: float

    def blur_lengths(self, omega: np.ndarray, fx: float, fy: float) -> tuple[float, float]:
        """(horizontal, vertical) blur length in px of a camera turning at ``omega`` (3,) rad/s in the
        optical frame."""
        w = np.asarray(omega, dtype=np.float64).reshape(3)
        if not np.isfinite(w).all():
            raise InvalidInput("omega", w.tolist(), "a finite angular velocity (rad/s, optical frame)")
        return abs(w[1]) * self.exposure_s * fx, abs(w[0]) * self.exposure_s * fy

    def apply(self, rgb: np.ndarray, omega: np.ndarray, fx: float, fy: float) -> np.ndarray:
        """Noisy copy of ``rgb`` ((H, W, 3) uint8) from a camera with focal lengths ``fx``, ``fy`` (px)
        turning at ``omega`` (3,) rad/s in its optical frame during the exposure."""
        img = np.asarray(rgb, dtype=np.float32)
        lx, ly = self.blur_lengths(omega, fx, fy)
        img = _box_blur(_box_blur(img, lx, axis=1), ly, axis=0)
        sigma = np.sqrt(self.read_sigma ** 2 + self.shot_gain * np.maximum(img, 0.0))
        img = img + sigma * self.rng.standard_normal(img.shape, dtype=np.float32)
        return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def _box_blur(img: np.ndarray, length: float, axis: int) -> np.ndarray:
    """Centred box filter of ``length`` px along ``axis`` of ``img`` (float32), edges repeated: taps at
    offsets -r..r weighted by their overlap with [-length/2, length/2] (whole inner taps, partial end
    taps), computed with a running sum so its cost does not grow with the length; under 1 px: ``img``."""
    half = length / 2.0
    if half <= 0.5:
        return img
    r = math.ceil(half - 0.5)
    end = half - (r - 0.5)  # weight of the taps at +-r, in (0, 1]
    a = np.swapaxes(img, 0, axis).astype(np.float64)  # filter along the first axis
    n = a.shape[0]
    padded = np.concatenate([np.repeat(a[:1], r, axis=0), a, np.repeat(a[-1:], r, axis=0)])
    csum = np.concatenate([np.zeros_like(a[:1]), np.cumsum(padded, axis=0)])  # csum[k] = sum of padded[:k]
    inner = csum[2 * r:2 * r + n] - csum[1:1 + n]
    out = (inner + end * (padded[:n] + padded[2 * r:2 * r + n])) / length
    return np.swapaxes(out, 0, axis).astype(np.float32)


@register_model("laser")
class LaserNoise(NoiseModel):
    """Base laser (SICK TIM571): each finite range r becomes r + N(0, ``sigma_m``^2), clipped to the
    scanner's [range_min, range_max]; a beam is lost (``inf``, no echo) with probability ``dropout``.
    Beams without a return stay ``inf``. sigma 0.02 m is the ``<noise>`` of the base laser in the Fetch
    Gazebo model (``fetch_gazebo/robots/fetch.gazebo.xacro``, "based on spec for SICK TIM561")."""

    stream = "laser"
    summary = "base laser range noise (Gaussian, clipped to the range limits) and dropouts"
    PARAMS = (
        NoiseParam("sigma_m", 0.02, (0.0, 1.0), "m", "sigma of the range error"),
        NoiseParam("dropout", 0.0, (0.0, 1.0), "", "probability that a beam returns no echo"),
    )
    sigma_m: float
    dropout: float

    def apply(self, ranges: np.ndarray, range_min: float, range_max: float) -> np.ndarray:
        """Noisy copy of ``ranges`` (N,) metres (``inf`` = no return) of a scanner with limits
        ``range_min`` .. ``range_max`` (m)."""
        r = np.array(ranges, dtype=np.float64)
        hit = np.isfinite(r)
        noisy = np.clip(r + self.sigma_m * self.rng.standard_normal(r.shape), range_min, range_max)
        r = np.where(hit, noisy, r)
        r[self.rng.random(r.shape) < self.dropout] = np.inf
        return r.astype(np.float32)


@register_model("odometry")
class OdometryDrift(NoiseModel):
    """Wheel-odometry drift of the ``odom`` -> ``base_link`` estimate (dead reckoning).

    Each true motion increment (dx, dy, dtheta) in the previous ``base_link`` (d = |(dx, dy)| m travelled)
    is integrated as

        (dx, dy)^ = (dx, dy) (1 + e_s) + (dx, dy)/d N(0, trans_walk^2 d)
        dtheta^   = dtheta (1 + e_r) + e_y d + N(0, rot_walk^2 |dtheta|)

    with per-episode calibration errors e_s ~ N(0, ``scale_sigma``^2) (wheel radius: m per m travelled),
    e_r ~ N(0, ``turn_scale_sigma``^2) (track width: rad per rad turned) and e_y ~ N(0,
    ``yaw_per_m_sigma``^2) (unequal wheels: heading rad per m travelled): the systematic error grows in
    proportion to the distance travelled and the angle turned, the random walk with their square roots,
    and neither depends on how often the estimate is updated. Heading errors rotate later translation, so
    the position error of a long run grows faster than its length.
    """

    stream = "odometry"
    summary = "odometry drift proportional to distance travelled and angle turned (odom -> base_link)"
    PARAMS = (
        NoiseParam("scale_sigma", 0.01, (0.0, 0.5), "m/m", "sigma of the per-episode distance scale error"),
        NoiseParam("turn_scale_sigma", 0.02, (0.0, 0.5), "rad/rad", "sigma of the per-episode turn scale error"),
        NoiseParam("yaw_per_m_sigma", 0.005, (0.0, 0.5), "rad/m", "sigma of the per-episode heading drift"),
        NoiseParam("trans_walk", 0.002, (0.0, 0.5), "m/sqrt(m)", "random-walk translation error"),
        NoiseParam("rot_walk", 0.005, (0.0, 0.5), "rad/sqrt(rad)", "random-walk rotation error"),
    )
    scale_sigma: float
    turn_scale_sigma: float
    yaw_per_m_sigma: float
    trans_walk: float
    rot_walk: float

    def reset(self) -> None:
        e = self.rng.standard_normal(3)
        self.errors = (self.scale_sigma * e[0], self.turn_scale_sigma * e[1], self.yaw_per_m_sigma * e[2])
        self._true: Pose2D | None = None
        self._estimate: Pose2D | None = None

    def update(self, true_pose: Pose2D) -> Pose2D:
        """The odometry estimate (``odom``) after the robot moved to ``true_pose`` (its true pose in ``odom``,
        m and rad); the first call of an episode starts the estimate at ``true_pose``."""
        if not true_pose.is_finite():
            raise InvalidInput("true_pose", true_pose, "finite x, y (m) and yaw (rad)")
        if self._true is None or self._estimate is None:
            self._true = self._estimate = true_pose
            return true_pose
        p, q = self._true, true_pose
        c, s = math.cos(p.yaw), math.sin(p.yaw)
        dx, dy = c * (q.x - p.x) + s * (q.y - p.y), -s * (q.x - p.x) + c * (q.y - p.y)  # in the previous base_link
        dth = wrap_angle(q.yaw - p.yaw)
        d = math.hypot(dx, dy)
        e_s, e_r, e_y = self.errors
        walk = self.rng.standard_normal(2)  # always two draws: the stream does not depend on the motion
        gain = 1.0 + e_s + (self.trans_walk * walk[0] / math.sqrt(d) if d > 0 else 0.0)
        dx_e, dy_e = dx * gain, dy * gain
        dth_e = dth * (1.0 + e_r) + e_y * d + self.rot_walk * math.sqrt(abs(dth)) * walk[1]
        e = self._estimate
        ce, se = math.cos(e.yaw), math.sin(e.yaw)
        self._estimate = Pose2D(e.x + ce * dx_e - se * dy_e, e.y + se * dx_e + ce * dy_e, wrap_angle(e.yaw + dth_e))
        self._true = q
        return self._estimate


@register_model("actuation")
class ActuationNoise(NoiseModel):
    """Actuation error of each primitive action (lockstep): an action asking for translation t (m, along
    the heading) and rotation r (rad) realises

        t^ = t (1 + N(0, trans_fraction^2)) + N(0, trans_sigma_m^2)
        r^ = r (1 + N(0, rot_fraction^2)) + N(0, rot_sigma_rad^2)

    for every moving action (FORWARD: t = 0.25 m, r = 0; a turn: t = 0, r = +-15 deg), so a forward step
    also turns slightly and a turn creeps; STOP stays still. The realised motion is then clipped by the
    navigable space like any other."""

    stream = "actuation"
    summary = "actuation error of each primitive action (translation and rotation)"
    PARAMS = (
        NoiseParam("trans_fraction", 0.02, (0.0, 0.5), "m/m", "sigma of the relative translation error"),
        NoiseParam("trans_sigma_m", 0.005, (0.0, 0.1), "m", "sigma of the additive translation error"),
        NoiseParam("rot_fraction", 0.02, (0.0, 0.5), "rad/rad", "sigma of the relative rotation error"),
        NoiseParam("rot_sigma_rad", 0.005, (0.0, 0.2), "rad", "sigma of the additive rotation error"),
    )
    trans_fraction: float
    trans_sigma_m: float
    rot_fraction: float
    rot_sigma_rad: float

    def realise(self, translation_m: float, rotation_rad: float) -> tuple[float, float]:
        """(translation m, rotation rad) realised by an action that asks for ``translation_m`` and
        ``rotation_rad``; (0, 0) stays (0, 0)."""
        if not (math.isfinite(translation_m) and math.isfinite(rotation_rad)):
            raise InvalidInput("action motion", (translation_m, rotation_rad), "finite metres and radians")
        e = self.rng.standard_normal(4)  # always four draws: the stream does not depend on the action
        if translation_m == 0.0 and rotation_rad == 0.0:
            return 0.0, 0.0
        return (translation_m * (1.0 + self.trans_fraction * e[0]) + self.trans_sigma_m * e[1],
                rotation_rad * (1.0 + self.rot_fraction * e[2]) + self.rot_sigma_rad * e[3])


@register_model("latency")
class CameraLatency(NoiseModel):
    """Camera latency: a frame captured at sim time t is delivered at t + ``delay_s`` + |N(0, jitter_s^2)|
    (never before the previous frame: the driver delivers in order), still stamped t (its capture time),
    as a real driver stamps frames. Frames are held in a queue (:meth:`push`, :meth:`due`); the bridge
    supports it in ``free_run`` only (in lockstep each observation is the frame of the action's end)."""

    stream = "latency"
    summary = "camera latency (frames delivered after capture, keeping their capture stamp; free_run only)"
    PARAMS = (
        NoiseParam("delay_s", 0.1, (0.0, 0.5), "s", "delay from capture to delivery"),
        NoiseParam("jitter_s", 0.0, (0.0, 0.05), "s", "sigma of the extra (half-normal) delay"),
    )
    delay_s: float
    jitter_s: float

    def reset(self) -> None:
        self._queue: deque[tuple[float, float, Any]] = deque()  # (delivery time, capture time, frame)
        self._last = -math.inf

    def push(self, t_capture: float, frame: Any) -> float:
        """Queue ``frame`` captured at ``t_capture`` (sim s); returns its delivery time (sim s)."""
        if not math.isfinite(t_capture):
            raise InvalidInput("t_capture", t_capture, "a finite sim time (s)")
        t = max(self._last, t_capture + self.delay_s + abs(self.jitter_s * float(self.rng.standard_normal())))
        self._last = t
        self._queue.append((t, t_capture, frame))
        return t

    def due(self, t_now: float) -> list[tuple[float, Any]]:
        """(capture time, frame) of every queued frame whose delivery time is at most ``t_now`` (sim s,
        1 ns tolerance), oldest first; they leave the queue."""
        out = []
        while self._queue and self._queue[0][0] <= t_now + 1e-9:
            _, t_capture, frame = self._queue.popleft()
            out.append((t_capture, frame))
        return out

    def __len__(self) -> int:
        return len(self._queue)


# ---------------------------------------------------------------------------------------------- container
class NoiseSet:
    """The enabled noise models of one bridge, reseeded per episode. Each ``apply_*`` passes its input
    through every enabled model of its stream in registration order, and returns it unchanged (the same
    object) when none is on. One ``latency`` model at most (its queue delivers the frames)."""

    def __init__(self, models: Mapping[str, NoiseModel] | None = None, seed: int = 0) -> None:
        order = NOISE_MODELS.registered()
        given = dict(models or {})
        self.models: dict[str, NoiseModel] = dict(sorted(given.items(), key=lambda kv: (
            order.index(kv[0]) if kv[0] in order else len(order))))
        self.streams: dict[str, list[NoiseModel]] = {}
        for name, model in self.models.items():
            if model.stream not in STREAMS:
                raise InvalidInput(f"noise model {name!r} stream", model.stream, f"one of {', '.join(STREAMS)}")
            self.streams.setdefault(model.stream, []).append(model)
        latency = [m.name for m in self.streams.get("latency", [])]
        if len(latency) > 1:
            raise InvalidInput(f"{CONFIG_PREFIX}{latency[1]}_{ENABLED}", True,
                               f"false while {CONFIG_PREFIX}{latency[0]}_{ENABLED} is true (one latency model at a time)")
        self.reseed(seed)

    @classmethod
    def from_config(cls, config: Mapping[str, Any], seed: int = 0) -> NoiseSet:
        """Models from flat config keys ``noise_<model>_enabled`` (default false) and
        ``noise_<model>_<param>`` (default: the model's), as in ``config/bench.yaml``; keys not starting
        with ``noise_`` and ``noise_seed`` are ignored, other unknown ``noise_`` keys and values out of
        range raise :class:`InvalidInput` naming the key."""
        names = sorted(NOISE_MODELS.names(), key=len, reverse=True)  # longest first: no prefix clashes
        grouped: dict[str, dict[str, Any]] = {}
        for key, value in config.items():
            if not key.startswith(CONFIG_PREFIX) or key == SEED_KEY:
                continue
            rest = key[len(CONFIG_PREFIX):]
            name = next((n for n in names if rest.startswith(n + "_")), None)
            if name is None:
                raise InvalidInput(key, value, f"a key noise_<model>_<param> with a model among "
                                               f"{', '.join(NOISE_MODELS.names())}")
            grouped.setdefault(name, {})[rest[len(name) + 1:]] = value
        models: dict[str, NoiseModel] = {}
        for name, params in grouped.items():
            enabled = params.pop(ENABLED, False)
            if not isinstance(enabled, (bool, np.bool_)):
                raise InvalidInput(f"{CONFIG_PREFIX}{name}_{ENABLED}", enabled, "true or false")
            model = NOISE_MODELS.create(name, **params)  # checked even when off: a bad value is named now
            if enabled:
                models[name] = model
        return cls(models, seed)

    def reseed(self, seed: int) -> None:
        """Start an episode: each model gets the generator of (``seed``, its name) and clears its state."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise InvalidInput(SEED_KEY, seed, "an integer >= 0")
        self.seed = int(seed)
        for name, model in self.models.items():
            model.reseed(model_rng(self.seed, name))

    def __contains__(self, stream: object) -> bool:
        """Whether a model of ``stream`` (a key of :data:`STREAMS`) is enabled."""
        return stream in self.streams

    def get(self, stream: str) -> NoiseModel | None:
        """The first enabled model of ``stream``, else None (the ``latency`` model: the only one)."""
        return self.streams.get(stream, [None])[0]

    def apply_depth(self, depth: np.ndarray, fx: float) -> np.ndarray:
        """Depth (H, W) float32 m through the ``depth`` models (:meth:`DepthNoise.apply`)."""
        for m in self.streams.get("depth", ()):
            depth = m.apply(depth, fx)  # type: ignore[attr-defined]
        return depth

    def apply_rgb(self, rgb: np.ndarray, omega: np.ndarray, fx: float, fy: float) -> np.ndarray:
        """RGB (H, W, 3) uint8 through the ``rgb`` models (:meth:`RgbNoise.apply`: blur and noise)."""
        for m in self.streams.get("rgb", ()):
            rgb = m.apply(rgb, omega, fx, fy)  # type: ignore[attr-defined]
        return rgb

    def apply_laser(self, ranges: np.ndarray, range_min: float, range_max: float) -> np.ndarray:
        """Laser ranges (N,) m through the ``laser`` models (:meth:`LaserNoise.apply`)."""
        for m in self.streams.get("laser", ()):
            ranges = m.apply(ranges, range_min, range_max)  # type: ignore[attr-defined]
        return ranges

    def odometry(self, true_pose: Pose2D) -> Pose2D:
        """Odometry estimate in ``odom`` for the true pose in ``odom`` (:meth:`OdometryDrift.update`)."""
        for m in self.streams.get("odometry", ()):
            true_pose = m.update(true_pose)  # type: ignore[attr-defined]
        return true_pose

    def realise(self, translation_m: float, rotation_rad: float) -> tuple[float, float]:
        """Realised (translation m, rotation rad) of a primitive action (:meth:`ActuationNoise.realise`)."""
        for m in self.streams.get("actuation", ()):
            translation_m, rotation_rad = m.realise(translation_m, rotation_rad)  # type: ignore[attr-defined]
        return translation_m, rotation_rad

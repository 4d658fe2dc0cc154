"""The perception node: person detections from the camera stream, and a recognize action.

- subscribes ``/head_camera/rgb/image_raw`` (+ registered depth, camera_info and TF) and publishes
  ``/affectsim/person_detections`` (``affectsim_interfaces/PersonDetections``: box, 33 keypoints,
  the person's floor position in ``map`` located from depth by the same code as the policies,
  :func:`affectsim_core.person_tracking.locate`) at most ``detect_rate_hz`` (image time);
- serves ``/affectsim/recognize`` (``affectsim_interfaces/Recognize``): 8 rgb8 224x224 frames in,
  the prediction of every configured recognizer (parameter ``recognizers``) out, with the
  inference time and, from recognizers that rate it, valence-arousal-dominance; with ``stream``,
  8 to 2,400 stamped frames in and a prediction per recognizer for every window of 8 consecutive
  frames out (evolving episodes); a bad clip is rejected with the reason, a failing recognizer
  gives an ``error`` outcome, and the node keeps serving.

Recognizers run the same code as in-process (``RECOGNIZERS``), so a clip gives identical
predictions through ROS and in-process. Parameters: :data:`PARAMS`.
"""

from __future__ import annotations

import math
import threading
import time

import numpy as np
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image
from tf2_msgs.msg import TFMessage

from affectsim_core.errors import AffectSimError, InvalidInput
from affectsim_core.person_tracking import DETECTORS, locate
from affectsim_core.protocol import CLIP_FRAMES, CLIP_SIZE
from affectsim_core.ros.calls import server_qos
from affectsim_core.ros.conversions import from_time, image_to_array
from affectsim_core.ros.goals import end_goal, publish_feedback
from affectsim_core.ros.node_main import side_node
from affectsim_core.ros.params import Param, declare_params
from affectsim_core.ros.sensors import observation_from_msgs, rgb_array
from affectsim_core.sync import SYNC_SLOP_S, ApproximatePairs
from affectsim_core.ros import tf_tree
from affectsim_core.ros.bridge_client import SENSOR_QOS
from affectsim_core.ros.topics import SERVICES, TOPICS
from affectsim_core.tf_buffer import EXTRAPOLATION_S, TfBuffer, TransformError
from affectsim_interfaces.action import Recognize
from affectsim_interfaces.msg import PersonDetection, PersonDetections, RecognizerPrediction
from affectsim_perception.recognizers import DEFAULT_RECOGNIZERS, RECOGNIZERS, ClipInput, Prediction, Recognizer
from affectsim_perception.recognizers.base import MAX_STREAM_FRAMES, StreamInput

PARAMS: tuple[Param, ...] = (
    Param("recognizers", list(DEFAULT_RECOGNIZERS), "recognizers to run (registered names)",
          choices=RECOGNIZERS.names),
    Param("detector", "blazepose", "person detector of the detections topic (registered name)",
          choices=DETECTORS.names),
    Param("detect_rate_hz", 4.0, "maximum person-detection rate on the camera stream (image time); 0 = off",
          bounds=(0.0, 60.0)),
    Param("sensor_qos", "best_effort", "reliability of the camera subscriptions: best_effort matches reliable and "
          "best-effort (sensor-data) publishers alike", choices=SENSOR_QOS),
    Param("sync_slop_s", SYNC_SLOP_S, "depth is paired with the RGB frame stamped nearest, within this (s)",
          bounds=(0.0, 0.5)),
    Param("tf_extrapolation_s", EXTRAPOLATION_S, "a transform is held this long (s) after its newest stamp",
          bounds=(0.0, 1.0)),
    Param("tf_wait_s", 0.5, "how long (s) a detection waits for the transforms at its frame's stamp", bounds=(0.0, 5.0)),
)
PENDING = 8  # frames per stream awaiting their partner (RGB or depth)


def _prediction_msg(name: str, estimates_vad: bool, pred: Prediction, seconds: float) -> RecognizerPrediction:
    return RecognizerPrediction(recognizer=name, label=pred.label or "", probs=[float(v) for v in pred.probs],
                                outcome=pred.outcome, detail=pred.detail, seconds=seconds,
                                estimates_vad=bool(estimates_vad),
                                vad=[] if pred.vad is None else [float(v) for v in pred.vad])


class PerceptionNode(Node):
    def __init__(self) -> None:
        super().__init__("perception")
        p = declare_params(self, PARAMS)
        names = list(p["recognizers"])
        self.rate = float(p["detect_rate_hz"])
        self.recognizers: dict[str, Recognizer] = {n: RECOGNIZERS.create(n) for n in names}
        self.detector = DETECTORS.create(p["detector"])
        self._lock = threading.Lock()  # the TFLite interpreters are not re-entrant
        self._last_t = -math.inf
        self._pairs = ApproximatePairs(float(p["sync_slop_s"]), PENDING)
        self._info: CameraInfo | None = None
        self.tf = TfBuffer(extrapolation=float(p["tf_extrapolation_s"]))
        self._tf_wait = float(p["tf_wait_s"])
        self._sim_now: float | None = None  # the newest /clock (s, sim time); None: no simulator clock (a robot)
        self.pub = self.create_publisher(PersonDetections, TOPICS["person_detections"], 10)
        reliability = ReliabilityPolicy.BEST_EFFORT if p["sensor_qos"] == "best_effort" else ReliabilityPolicy.RELIABLE
        qos = QoSProfile(depth=PENDING, reliability=reliability)
        if self.rate > 0:
            # the streams on side nodes (affectsim_core.ros.node_main): the camera, whose callback detects, and
            # TF with the clock, on another thread since a detection waits for its transforms
            cam, tf = side_node(self, "_camera"), side_node(self, "_tf")
            cam.create_subscription(Image, TOPICS["rgb"], lambda m: self._pair("rgb", m), qos)
            cam.create_subscription(Image, TOPICS["depth"], lambda m: self._pair("depth", m), qos)
            cam.create_subscription(CameraInfo, TOPICS["rgb_info"], lambda m: setattr(self, "_info", m), qos)
            tf.create_subscription(TFMessage, TOPICS["tf"], lambda m: self._on_tf(m, False), tf_tree.TF_QOS)
            tf.create_subscription(TFMessage, TOPICS["tf_static"], lambda m: self._on_tf(m, True), tf_tree.TF_STATIC_QOS)
            tf.create_subscription(Clock, TOPICS["clock"], lambda m: setattr(self, "_sim_now", from_time(m.clock)),
                                   QoSProfile(depth=10))
            self.side_nodes = (cam, tf)
        ActionServer(self, Recognize, SERVICES["recognize"], execute_callback=self._recognize,
                     goal_callback=lambda _g: GoalResponse.ACCEPT, cancel_callback=lambda _g: CancelResponse.ACCEPT,
                     callback_group=ReentrantCallbackGroup(), **server_qos())
        self.get_logger().info(f"perception ready: recognizers={names} detect_rate_hz={self.rate}")

    # ------------------------------------------------------------------ detections
    def _pair(self, kind: str, msg: Image) -> None:
        """Pair RGB and registered depth by stamp, approximately (two drivers), then detect."""
        t = from_time(msg.header.stamp)
        for rgb, depth in self._pairs.add(kind, t, msg):
            self._on_image(rgb, depth)

    def _now(self) -> float:
        """Now (s) for the TF future check: the simulator's /clock, else this node's clock (a robot's
        system time). Not the newest camera stamp: frames wait behind the detector, so under load it
        lagged the transforms by seconds and the bench's map -> odom was refused as future-dated."""
        return self._sim_now if self._sim_now is not None else self.get_clock().now().nanoseconds * 1e-9

    def _on_tf(self, msg: TFMessage, static: bool) -> None:
        refused = tf_tree.feed(self.tf, msg, static, now=self._now())
        if refused:
            self.get_logger().warning(f"{len(refused)} transform(s) refused ({self.tf.refused} so far): {refused[0]}",
                                      throttle_duration_sec=1.0)

    def _on_image(self, msg: Image, depth: Image) -> None:
        t = from_time(msg.header.stamp)
        if t - self._last_t < 1.0 / self.rate - 1e-9 and t >= self._last_t:
            return
        self._last_t = t
        try:
            rgb = rgb_array(msg)
        except InvalidInput as exc:  # a camera on another encoding: said, not fatal
            self.get_logger().error(f"{TOPICS['rgb']} frame skipped: {exc}", throttle_duration_sec=5.0)
            return
        with self._lock:
            det = self.detector.detect(rgb)
        out = PersonDetections(header=msg.header)
        if det is not None:
            p = PersonDetection(x0=det.box[0], y0=det.box[1], x1=det.box[2], y1=det.box[3],
                                keypoints=np.concatenate([det.keypoints, det.visibility[:, None]], 1).ravel().tolist())
            p.position.x = p.position.y = p.position.z = math.nan
            person = self._locate(det, msg, depth)
            if person is not None:
                p.position.x, p.position.y, p.position.z = person.xy[0], person.xy[1], 0.0
            out.people.append(p)
        self.pub.publish(out)

    def _locate(self, det, rgb: Image, depth: Image):
        """The detection located in ``map`` as a policy would (None without camera info, TF or depth)."""
        if self._info is None:
            return None
        try:
            obs = observation_from_msgs(rgb, depth, self._info, self.tf, 0, self._tf_wait)
        except (TransformError, ValueError) as exc:
            self.get_logger().warning(f"person not located: {exc}", throttle_duration_sec=5.0)
            return None
        return locate(det, obs)

    # ------------------------------------------------------------------ recognition
    def _recognize(self, handle):
        goal = handle.request
        res = Recognize.Result()
        try:
            n = len(goal.frames)  # checked before any frame is converted
            if goal.stream and not (CLIP_FRAMES <= n <= MAX_STREAM_FRAMES and len(goal.stamps) == n):
                raise InvalidInput("frames/stamps", f"{n} frames, {len(goal.stamps)} stamps",
                                   f"{CLIP_FRAMES} to {MAX_STREAM_FRAMES} frames with one stamp each (a stream)")
            if not goal.stream and n != CLIP_FRAMES:
                raise InvalidInput("frames", f"{n} frames", f"{CLIP_FRAMES} frames")
            stride = max(1, int(goal.stride))
            if goal.stream and stride > n:
                raise InvalidInput("stride", goal.stride, f"0 to {n} frames (the stream's length)")
            for k, f in enumerate(goal.frames):
                if (f.encoding, f.width, f.height, f.step, len(f.data)) != (
                        "rgb8", CLIP_SIZE, CLIP_SIZE, 3 * CLIP_SIZE, 3 * CLIP_SIZE ** 2):
                    raise InvalidInput(f"frames[{k}]", f"{f.encoding} {f.width}x{f.height}, step {f.step}, "
                                       f"{len(f.data)} bytes", f"rgb8 {CLIP_SIZE}x{CLIP_SIZE}, step {3 * CLIP_SIZE}, "
                                       f"{3 * CLIP_SIZE ** 2} bytes")
            frames = np.stack([image_to_array(f) for f in goal.frames])
            clip = StreamInput(frames, np.array([from_time(t) for t in goal.stamps])) if goal.stream \
                else ClipInput(frames)
            goal.frames = []  # the server keeps the goal (with the result) RESULT_KEEP_S: not its pixels
            names = list(goal.recognizers) or list(self.recognizers)
            unknown = [n for n in names if n not in self.recognizers]
            if unknown:
                raise InvalidInput("recognizers", unknown, f"configured ones {list(self.recognizers)}")
        except Exception as exc:  # noqa: BLE001 - a bad clip (or a MemoryError) fails this goal, not the node
            goal.frames = []
            res.message = str(exc) if isinstance(exc, (AffectSimError, ValueError)) else f"{type(exc).__name__}: {exc}"
            end_goal(handle, "abort", self.get_logger().warning)
            return res
        per: list[list[RecognizerPrediction]] = []
        times: list[float] = []
        for k, name in enumerate(names):
            if handle.is_cancel_requested:
                end_goal(handle, "canceled", self.get_logger().warning)
                res.message = "cancelled"
                return res
            fb = Recognize.Feedback(recognizer=name, done=k, total=len(names))
            publish_feedback(handle, fb, self.get_logger().warning)
            t0 = time.perf_counter()
            rec = self.recognizers[name]
            try:
                with self._lock:
                    preds = rec.predict_stream(clip, stride) if goal.stream else [(0.0, rec.predict(clip))]
            except Exception as exc:  # noqa: BLE001 - one failing recognizer must not stop the others
                failed = Prediction.failed("error", f"{type(exc).__name__}: {exc}")
                preds = [(t, failed) for t, _ in clip.windows(stride)] if goal.stream else [(0.0, failed)]
            dt = (time.perf_counter() - t0) / len(preds)  # seconds per window
            per.append([_prediction_msg(name, rec.estimates_vad, p, dt) for _, p in preds])
            times = [t for t, _ in preds]
        if goal.stream:  # window-major: every recognizer of window 0, then of window 1, ...
            res.window_times = [float(t) for t in times]
            res.predictions = [m for window in zip(*per) for m in window]
        else:
            res.predictions = [m for ms in per for m in ms]
        end_goal(handle, "succeed", self.get_logger().warning)
        return res

    def destroy_node(self) -> None:
        for r in getattr(self, "recognizers", {}).values():  # absent when __init__ failed on a bad parameter
            r.close()
        if getattr(self, "detector", None) is not None:
            self.detector.close()
        super().destroy_node()

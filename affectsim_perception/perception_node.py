"""The perception node: person detections from the camera stream, and a recognize action.

- subscribes ``/head_camera/rgb/image_raw`` (+ registered depth and camera_info) and publishes
  ``/affectsim/person_detections`` (``affectsim_interfaces/PersonDetections``: box, 33 keypoints,
  position in the optical frame from depth) at most ``detect_rate_hz`` (sim or wall time of the
  image stamps);
- serves ``/affectsim/recognize`` (``affectsim_interfaces/Recognize``): 8 rgb8 224x224 frames in,
  the prediction of every configured recognizer (parameter ``recognizers``) out, with the
  inference time; a bad clip is rejected with the reason, a failing recognizer gives an
  ``error`` outcome, and the node keeps serving.

Recognizers run the same code as offline (``RECOGNIZERS``), so a clip gives identical
predictions through ROS and in-process.
"""

from __future__ import annotations

import math
import threading
import time

import numpy as np
from affectsim_interfaces.action import Recognize
from affectsim_interfaces.msg import PersonDetection, PersonDetections, RecognizerPrediction
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image

from affectsim_perception.person_model import BlazePose
from affectsim_perception.recognizers import RECOGNIZERS, ClipInput, Prediction, Recognizer
from affectsim_ros.ros.node_main import run_node
from affectsim_ros.core.errors import AffectSimError, InvalidInput
from affectsim_ros.ros.conversions import from_time, image_to_array

PARAMS: dict[str, tuple[object, str]] = {
    "recognizers": (["pose-temporal", "rgb-clip", "committee", "majority", "uniform"], "recognizers to run (registered names)"),
    "detect_rate_hz": (4.0, "maximum person-detection rate on the camera stream (image time); 0 = off"),
}


class PerceptionNode(Node):
    def __init__(self) -> None:
        super().__init__("perception")
        for name, (default, _desc) in PARAMS.items():
            self.declare_parameter(name, default)
        names = list(self.get_parameter("recognizers").value)
        for n in names:
            if n not in RECOGNIZERS:
                raise InvalidInput("parameter recognizers", n, f"names from {RECOGNIZERS.names()}", where="perception")
        self.rate = float(self.get_parameter("detect_rate_hz").value)
        if not (math.isfinite(self.rate) and 0 <= self.rate <= 60):
            raise InvalidInput("parameter detect_rate_hz", self.rate, "a rate in [0, 60] Hz", where="perception")
        self.recognizers: dict[str, Recognizer] = {n: RECOGNIZERS.create(n) for n in names}
        self.detector = BlazePose()
        self._lock = threading.Lock()  # the TFLite interpreters are not re-entrant
        self._last_t = -math.inf
        self._pending: dict[float, dict[str, Image]] = {}
        self._info: CameraInfo | None = None
        self.pub = self.create_publisher(PersonDetections, "/affectsim/person_detections", 10)
        qos = QoSProfile(depth=2, reliability=ReliabilityPolicy.RELIABLE)
        cam = MutuallyExclusiveCallbackGroup()
        if self.rate > 0:
            self.create_subscription(Image, "/head_camera/rgb/image_raw", lambda m: self._pair("rgb", m), qos,
                                     callback_group=cam)
            self.create_subscription(Image, "/head_camera/depth_registered/image_raw", lambda m: self._pair("depth", m),
                                     qos, callback_group=cam)
            self.create_subscription(CameraInfo, "/head_camera/rgb/camera_info",
                                     lambda m: setattr(self, "_info", m), qos, callback_group=cam)
        ActionServer(self, Recognize, "/affectsim/recognize", execute_callback=self._recognize,
                     goal_callback=lambda _g: GoalResponse.ACCEPT, cancel_callback=lambda _g: CancelResponse.ACCEPT,
                     callback_group=ReentrantCallbackGroup())
        self.get_logger().info(f"perception ready: recognizers={names} detect_rate_hz={self.rate}")

    # ------------------------------------------------------------------ detections
    def _pair(self, kind: str, msg: Image) -> None:
        """Match RGB and registered depth by stamp (they arrive on two topics), then detect."""
        t = from_time(msg.header.stamp)
        entry = self._pending.setdefault(t, {})
        entry[kind] = msg
        if len(entry) == 2:
            del self._pending[t]
            self._on_image(entry["rgb"], entry["depth"])
        while len(self._pending) > 4:
            self._pending.pop(min(self._pending))

    def _on_image(self, msg: Image, depth: Image) -> None:
        t = from_time(msg.header.stamp)
        if t - self._last_t < 1.0 / self.rate - 1e-9 and t >= self._last_t:
            return
        self._last_t = t
        rgb = image_to_array(msg)
        with self._lock:
            det = self.detector.detect(rgb)
        out = PersonDetections(header=msg.header)
        if det is not None:
            p = PersonDetection(x0=det.box[0], y0=det.box[1], x1=det.box[2], y1=det.box[3],
                                keypoints=np.concatenate([det.keypoints, det.visibility[:, None]], 1).ravel().tolist())
            p.position.x = p.position.y = p.position.z = math.nan
            info = self._info
            if info is not None:
                d = image_to_array(depth)
                torso = det.keypoints[[11, 12, 23, 24]].mean(0)
                u, v = int(np.clip(torso[0], 0, d.shape[1] - 1)), int(np.clip(torso[1], 0, d.shape[0] - 1))
                z = float(d[v, u])
                if math.isfinite(z):
                    k = info.k
                    p.position.x, p.position.y, p.position.z = (u - k[2]) / k[0] * z, (v - k[5]) / k[4] * z, z
            out.people.append(p)
        self.pub.publish(out)

    # ------------------------------------------------------------------ recognition
    def _recognize(self, handle):
        goal = handle.request
        res = Recognize.Result()
        try:
            frames = np.stack([image_to_array(f) for f in goal.frames]) if goal.frames else np.zeros((0,), np.uint8)
            if any(f.encoding != "rgb8" for f in goal.frames):
                raise InvalidInput("frames[].encoding", sorted({f.encoding for f in goal.frames}), "rgb8")
            clip = ClipInput(frames)
            names = list(goal.recognizers) or list(self.recognizers)
            unknown = [n for n in names if n not in self.recognizers]
            if unknown:
                raise InvalidInput("recognizers", unknown, f"configured ones {list(self.recognizers)}")
        except (AffectSimError, ValueError) as exc:
            res.message = str(exc)
            handle.abort()
            return res
        for k, name in enumerate(names):
            if handle.is_cancel_requested:
                handle.canceled()
                res.message = "cancelled"
                return res
            fb = Recognize.Feedback(recognizer=name, done=k, total=len(names))
            handle.publish_feedback(fb)
            t0 = time.perf_counter()
            try:
                with self._lock:
                    pred = self.recognizers[name].predict(clip)
            except Exception as exc:  # noqa: BLE001 - one failing recognizer must not stop the others
                pred = Prediction.failed("error", f"{type(exc).__name__}: {exc}")
            res.predictions.append(RecognizerPrediction(
                recognizer=name, label=pred.label or "", probs=[float(v) for v in pred.probs], outcome=pred.outcome,
                detail=pred.detail, seconds=time.perf_counter() - t0))
        handle.succeed()
        return res

    def destroy_node(self) -> None:
        for r in self.recognizers.values():
            r.close()
        self.detector.close()
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    run_node(PerceptionNode, "perception", args, threads=3)


if __name__ == "__main__":
    main()

"""BlazePose GHUM 3D (``full``) run straight from the two TFLite models inside ``mediapipe==0.10.14``.

The same models and the same steps as mediapipe's legacy ``pose_landmark_cpu`` graph, without the
graph runtime (3x faster per frame on a 2-core CPU):

1. detector (224x224, letterboxed, values in [-1, 1]): 2254 SSD anchors, sigmoid scores,
   weighted non-maximum suppression around the best box; its keypoints 0 (hip centre) and
   1 (full-body scale point) give the region of interest (ROI);
2. ROI: centre at the hip point, side 2 x |scale point - hip point| x 1.25, rotated so that the
   body's up vector points up in the crop;
3. landmark model on the rotated 256x256 crop (values in [0, 1], edges replicated): 39 landmarks
   (33 body + 6 auxiliary) with visibility, a pose-presence score, world landmarks (metres), and a
   heatmap that refines each landmark's crop position (7x7 window, sigmoid confidence >= 0.5);
4. tracking: the next frame's ROI comes from auxiliary landmarks 33 and 34 the same way; the
   detector runs again only when the presence score drops below its threshold.

The landmark model's segmentation head is cut out of the graph when it is loaded (it is never
used here and costs a fifth of the model's time); the remaining outputs are unchanged, bit for bit.

Image coordinates are pixels of the input frame, x right, y down; world landmarks are metres
around the hip centre in BlazePose's frame (x right, y down, z away from the camera, rotated
with the ROI as mediapipe does).
"""

from __future__ import annotations

import functools
import importlib.util
import math
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from affectsim_core.errors import MissingDependency

DETECTOR_SIZE = 224  # px, detector input side
LANDMARK_SIZE = 256  # px, landmark model input side
N_LANDMARKS = 39  # 33 body landmarks + 6 auxiliary (33: hip centre, 34: scale point)
ROI_SCALE = 1.25
REFINE_KERNEL = 7
REFINE_MIN_CONFIDENCE = 0.5
NMS_IOU = 0.3


@dataclass(frozen=True)
class Roi:
    """Square region of interest: centre (px), side (px), rotation (rad, counter-clockwise
    of the image's x axis turns the body upright in the crop)."""

    cx: float
    cy: float
    size: float
    rotation: float


@dataclass(frozen=True)
class Landmarks:
    """``points`` (39, 2) px, ``visibility`` (39,) in [0, 1], ``world`` (39, 3) m,
    ``presence`` in [0, 1] (the model's confidence that a person is in the ROI)."""

    points: np.ndarray
    visibility: np.ndarray
    world: np.ndarray
    presence: float


def model_dir() -> Path:
    """Folder holding mediapipe's bundled ``pose_detection`` and ``pose_landmark`` modules."""
    # Located, not imported: importing mediapipe loads its whole tasks API, whose audio part probes for
    # PortAudio with ctypes.util.find_library (an ldconfig, gcc and ld process per name tried).
    spec = importlib.util.find_spec("mediapipe")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependency("BlazePose", "mediapipe==0.10.14", "run `make setup`")
    return Path(list(spec.submodule_search_locations)[0]) / "modules"


def ssd_anchors() -> np.ndarray:
    """(2254, 2) anchor centres in [0, 1] (x, y) of the detector: strides 8, 16, 32, 32, 32, two
    anchors per layer and cell, layers of equal stride sharing one grid (mediapipe's
    ``SsdAnchorsCalculator`` with fixed anchor size)."""
    strides = [8, 16, 32, 32, 32]
    out, i = [], 0
    while i < len(strides):
        j = i
        while j < len(strides) and strides[j] == strides[i]:
            j += 1
        cells = math.ceil(DETECTOR_SIZE / strides[i])
        ys, xs = np.meshgrid((np.arange(cells) + 0.5) / cells, (np.arange(cells) + 0.5) / cells, indexing="ij")
        out.append(np.repeat(np.stack([xs.ravel(), ys.ravel()], 1), 2 * (j - i), axis=0))
        i = j
    return np.concatenate(out)


def prune_outputs(path: Path, keep: tuple[str, ...]) -> bytes:
    """The TFLite model at ``path`` with only the outputs named ``keep`` and the operators they
    depend on."""
    from ai_edge_litert.tools import flatbuffer_utils  # flatbuffer tooling, only to prune a model once

    model = flatbuffer_utils.read_model(str(path))
    graph = model.subgraphs[0]
    producer = {t: k for k, op in enumerate(graph.operators) for t in op.outputs}
    outputs = [t for t in graph.outputs if graph.tensors[t].name.decode() in keep]
    if len(outputs) != len(keep):
        raise ValueError(f"{path.name}: outputs {keep} expected, found "
                         f"{[graph.tensors[t].name.decode() for t in graph.outputs]}")
    needed, stack = set(), list(outputs)
    while stack:
        k = producer.get(stack.pop())
        if k is not None and k not in needed:
            needed.add(k)
            stack += [t for t in graph.operators[k].inputs if t >= 0]
    graph.operators = [op for k, op in enumerate(graph.operators) if k in needed]
    graph.outputs = outputs
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


@functools.cache
def _landmark_model() -> bytes:
    """The landmark model without its segmentation head, pruned once per process (~0.3 s)."""
    return prune_outputs(model_dir() / "pose_landmark" / "pose_landmark_full.tflite",
                         ("Identity", "Identity_1", "Identity_3", "Identity_4"))


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(np.asarray(x, np.float64), -100.0, 100.0)))


def roi_from_points(centre: np.ndarray, scale_point: np.ndarray) -> Roi:
    """ROI around ``centre`` (px) whose side is 2 x 1.25 x the distance to ``scale_point`` (px),
    rotated so that the centre-to-scale-point direction points up in the crop."""
    dx, dy = float(scale_point[0] - centre[0]), float(scale_point[1] - centre[1])
    rot = math.pi / 2 - math.atan2(-dy, dx)
    rot -= 2 * math.pi * math.floor((rot + math.pi) / (2 * math.pi))
    return Roi(float(centre[0]), float(centre[1]), 2 * math.hypot(dx, dy) * ROI_SCALE, rot)


def refine_with_heatmap(xy: np.ndarray, heatmap: np.ndarray) -> np.ndarray:
    """Landmarks ``xy`` (n, 2) in [0, 1] of the crop moved to the confidence-weighted mean of the
    heatmap (h, w, n logits) in a 7x7 window around them, where the window's peak confidence is at
    least 0.5 (mediapipe's ``RefineLandmarksFromHeatmapCalculator``)."""
    h, w, n = heatmap.shape
    off = (REFINE_KERNEL - 1) // 2
    col, row = (xy[:, 0] * w).astype(int), (xy[:, 1] * h).astype(int)  # truncated, as mediapipe does
    inside = (col >= 0) & (col < w) & (row >= 0) & (row < h)
    k = np.arange(-off, off + 1)
    rows, cols = row[:, None] + k, col[:, None] + k  # (n, 7) window cells
    valid = ((rows >= 0) & (rows < h))[:, :, None] & ((cols >= 0) & (cols < w))[:, None, :]
    logits = heatmap[np.clip(rows, 0, h - 1)[:, :, None], np.clip(cols, 0, w - 1)[:, None, :],
                     np.arange(n)[:, None, None]]
    conf = np.where(valid, sigmoid(logits), 0.0)  # (n, 7, 7), cells outside the heatmap count 0
    total = conf.sum((1, 2))
    ok = inside & (conf.max((1, 2)) >= REFINE_MIN_CONFIDENCE) & (total > 0)
    out = xy.astype(np.float64).copy()
    safe = np.maximum(total, 1e-12)
    out[ok, 0] = ((conf.sum(1) * cols).sum(1) / safe / w)[ok]
    out[ok, 1] = ((conf.sum(2) * rows).sum(1) / safe / h)[ok]
    return out


class PoseGraph:
    """The detector and the landmark model on one frame at a time (no state)."""

    def __init__(self, threads: int = 2, min_detection_confidence: float = 0.5) -> None:
        try:
            from ai_edge_litert.interpreter import Interpreter  # the TFLite runtime, loaded with the first model
        except ImportError as exc:
            raise MissingDependency("BlazePose", "ai-edge-litert==2.3.0", "run `make setup`") from exc
        if not 0.0 <= min_detection_confidence <= 1.0:
            raise ValueError(f"min_detection_confidence={min_detection_confidence} is invalid; expected a value in [0, 1]")
        d = model_dir()
        self.min_detection_confidence = min_detection_confidence
        self._det = Interpreter(model_path=str(d / "pose_detection" / "pose_detection.tflite"), num_threads=threads)
        self._lm = Interpreter(model_content=_landmark_model(), num_threads=threads)
        for it in (self._det, self._lm):
            it.allocate_tensors()
        self._det_in = self._det.get_input_details()[0]["index"]
        self._lm_in = self._lm.get_input_details()[0]["index"]
        self._det_out = {o["name"]: o["index"] for o in self._det.get_output_details()}
        self._lm_out = {o["name"]: o["index"] for o in self._lm.get_output_details()}
        self._anchors = ssd_anchors()

    def detect(self, rgb: np.ndarray) -> Roi | None:
        """The ROI of the most confident person in ``rgb`` (H, W, 3) uint8, or None."""
        h, w = rgb.shape[:2]
        s = DETECTOR_SIZE / max(h, w)
        px, py = (DETECTOR_SIZE - round(w * s)) / 2, (DETECTOR_SIZE - round(h * s)) / 2
        m = np.array([[s, 0, px], [0, s, py]], np.float32)
        x = cv2.warpAffine(rgb, m, (DETECTOR_SIZE, DETECTOR_SIZE), flags=cv2.INTER_LINEAR,
                           borderMode=cv2.BORDER_CONSTANT)
        buf = self._det.tensor(self._det_in)()[0]  # written in place: no copies per frame
        np.subtract(np.divide(x, np.float32(127.5), out=buf, dtype=np.float32), np.float32(1.0), out=buf)
        del buf  # the interpreter refuses to run while a view of its buffers is held
        self._det.invoke()
        raw = self._det.get_tensor(self._det_out["Identity"])[0]
        score = sigmoid(self._det.get_tensor(self._det_out["Identity_1"])[0, :, 0])
        keep = np.flatnonzero(score >= self.min_detection_confidence)
        if keep.size == 0:
            return None
        anchors, score, raw = self._anchors[keep], score[keep], raw[keep]
        centre = raw[:, :2] / DETECTOR_SIZE + anchors
        half = raw[:, 2:4] / DETECTOR_SIZE / 2
        boxes = np.concatenate([centre - half, centre + half], 1)
        b = boxes[np.argmax(score)]
        inter = (np.clip(np.minimum(boxes[:, 2], b[2]) - np.maximum(boxes[:, 0], b[0]), 0, None)
                 * np.clip(np.minimum(boxes[:, 3], b[3]) - np.maximum(boxes[:, 1], b[1]), 0, None))
        area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
        group = inter / np.maximum(area + (b[2] - b[0]) * (b[3] - b[1]) - inter, 1e-12) > NMS_IOU
        kps = raw[group, 4:8].reshape(-1, 2, 2) / DETECTOR_SIZE + anchors[group, None]
        kp = (kps * score[group, None, None]).sum(0) / score[group].sum()
        kp = (kp * DETECTOR_SIZE - [px, py]) / s  # letterbox removed, px of the frame
        return roi_from_points(kp[0], kp[1])

    def landmarks(self, rgb: np.ndarray, roi: Roi) -> Landmarks:
        """The 39 landmarks of the person in ``roi`` of ``rgb``."""
        ca, sa = math.cos(roi.rotation), math.sin(roi.rotation)
        k = roi.size / LANDMARK_SIZE
        # crop pixel (u, v) -> frame: centre + R(rotation) ((u, v) k - size / 2)
        m = np.array([[ca * k, -sa * k, roi.cx - (ca - sa) * roi.size / 2],
                      [sa * k, ca * k, roi.cy - (sa + ca) * roi.size / 2]])
        crop = cv2.warpAffine(rgb, m, (LANDMARK_SIZE, LANDMARK_SIZE), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                              borderMode=cv2.BORDER_REPLICATE)
        buf = self._lm.tensor(self._lm_in)()[0]
        np.divide(crop, np.float32(255.0), out=buf, dtype=np.float32)
        del buf
        self._lm.invoke()
        raw = self._lm.get_tensor(self._lm_out["Identity"])[0].reshape(N_LANDMARKS, 5)
        presence = float(self._lm.get_tensor(self._lm_out["Identity_1"])[0, 0])
        world = self._lm.get_tensor(self._lm_out["Identity_4"])[0].reshape(N_LANDMARKS, 3).astype(np.float64)
        d = refine_with_heatmap(raw[:, :2] / LANDMARK_SIZE, self._lm.tensor(self._lm_out["Identity_3"])()[0]) - 0.5
        points = np.stack([ca * d[:, 0] - sa * d[:, 1], sa * d[:, 0] + ca * d[:, 1]], 1) * roi.size + [roi.cx, roi.cy]
        world = np.stack([ca * world[:, 0] - sa * world[:, 1], sa * world[:, 0] + ca * world[:, 1], world[:, 2]], 1)
        return Landmarks(points, sigmoid(raw[:, 3]), world, presence)

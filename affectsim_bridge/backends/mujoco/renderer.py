"""Offscreen RGB-D rendering with MuJoCo: one render pass gives registered colour and metric depth.

``mujoco.Renderer`` renders twice for RGB-D (colour, then depth); here one
``mjr_render`` is read back as both buffers. EGL contexts are bound to the thread
that created them (docs/design.md §4): create and use a renderer in one thread.
"""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])

import mujoco  # noqa: E402
import numpy as np  # noqa: E402


class RGBDRenderer:
    """Renders (H, W, 3) uint8 RGB and (H, W) float32 depth (metres along the optical axis)."""

    def __init__(self, model: mujoco.MjModel, width: int, height: int, max_geom: int = 2000) -> None:
        if width > model.vis.global_.offwidth or height > model.vis.global_.offheight:
            raise ValueError(
                f"render size {width}x{height} exceeds the model's offscreen buffer "
                f"{model.vis.global_.offwidth}x{model.vis.global_.offheight}"
            )
        self.model = model
        self.width, self.height = width, height
        self._gl = mujoco.GLContext(width, height)
        self._gl.make_current()
        self._ctx = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_100.value)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN.value, self._ctx)
        self._ctx.readDepthMap = mujoco.mjtDepthMap.mjDEPTH_ZEROFAR
        self._scene = mujoco.MjvScene(model, maxgeom=max_geom)
        self._rect = mujoco.MjrRect(0, 0, width, height)
        self._camera = mujoco.MjvCamera()
        self._camera.type = mujoco.mjtCamera.mjCAMERA_FIXED
        self._rgb = np.empty((height, width, 3), np.uint8)
        self._zbuf = np.empty((height, width), np.float32)
        extent = model.stat.extent
        self.near = float(model.vis.map.znear * extent)
        self.far = float(model.vis.map.zfar * extent)

    def render(self, data: mujoco.MjData, camera_id: int, option: mujoco.MjvOption,
               max_depth: float = np.inf) -> tuple[np.ndarray, np.ndarray]:
        """Render camera ``camera_id``; depth beyond ``max_depth`` m (or the far plane) is NaN."""
        self._gl.make_current()
        self._camera.fixedcamid = camera_id
        mujoco.mjv_updateScene(self.model, data, option, None, self._camera, mujoco.mjtCatBit.mjCAT_ALL.value,
                               self._scene)
        mujoco.mjr_render(self._rect, self._scene, self._ctx)
        mujoco.mjr_readPixels(self._rgb, self._zbuf, self._rect, self._ctx)
        rgb = self._rgb[::-1].copy()
        # zero-far depth map: d in [0, 1] -> metric z = n f / (n + d (f - n)), as mujoco.Renderer
        n, f = np.float32(self.near), np.float32(self.far)
        depth = self._zbuf[::-1] * (f - n)
        depth += n
        np.divide(n * f, depth, out=depth)
        depth[depth > min(max_depth, self.far * 0.999)] = np.nan  # d = 0 (nothing hit) maps to the far plane
        return rgb, depth

    def close(self) -> None:
        if self._gl is not None:
            self._gl.make_current()
            self._ctx.free()
            self._gl.free()
            self._gl = None

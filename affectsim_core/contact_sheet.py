"""Contact sheets (PNG) of head-camera frames and a top-down map with the trajectory. ROS-free."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

# perceptually ordered colour ramp (near = warm), for depth in metres
_RAMP = np.array([[0.99, 0.91, 0.15], [0.99, 0.55, 0.15], [0.85, 0.25, 0.35], [0.50, 0.10, 0.55],
                  [0.15, 0.10, 0.45], [0.02, 0.02, 0.10]])


def colorize_depth(depth: np.ndarray, max_m: float = 8.0) -> np.ndarray:
    """(H, W) metres -> (H, W, 3) uint8; NaN (no return) is grey."""
    d = np.clip(np.nan_to_num(depth, nan=max_m) / max_m, 0, 1) * (len(_RAMP) - 1)
    i = np.minimum(d.astype(int), len(_RAMP) - 2)
    f = (d - i)[..., None]
    rgb = (_RAMP[i] * (1 - f) + _RAMP[i + 1] * f) * 255
    rgb[np.isnan(depth)] = 128
    return rgb.astype(np.uint8)


def map_image(grid: np.ndarray, origin: tuple[float, float], resolution: float, trajectory: np.ndarray,
              scale: int = 4, labels: list[tuple[str, float, float]] | None = None) -> Image.Image:
    """Occupancy grid (row 0 = lowest y) with the trajectory (N, 2, map metres) drawn; north up."""
    colors = np.full(grid.shape + (3,), 200, np.uint8)
    colors[grid == 0] = 245
    colors[grid == 100] = 40
    img = Image.fromarray(colors[::-1]).resize((grid.shape[1] * scale, grid.shape[0] * scale), Image.NEAREST)
    draw = ImageDraw.Draw(img)

    def px(p) -> tuple[float, float]:
        return ((p[0] - origin[0]) / resolution * scale, (grid.shape[0] - (p[1] - origin[1]) / resolution) * scale)

    if len(trajectory) > 1:
        draw.line([px(p) for p in trajectory], fill=(220, 30, 30), width=3)
    if len(trajectory):
        for p, c in ((trajectory[0], (30, 160, 30)), (trajectory[-1], (30, 30, 220))):
            x, y = px(p)
            draw.ellipse([x - 6, y - 6, x + 6, y + 6], fill=c)
    for text, x, y in labels or []:
        draw.text(px((x, y)), text, fill=(0, 0, 160))
    return img


def contact_sheet(frames: list[tuple[np.ndarray, np.ndarray, str]], top_down: Image.Image,
                  tile_w: int = 320, cols: int = 2) -> Image.Image:
    """Grid of (RGB | depth) pairs with captions, and the map on the right."""
    tile_h = None
    tiles = []
    for rgb, depth, caption in frames:
        a = Image.fromarray(rgb)
        h = int(a.height * tile_w / a.width)
        tile_h = h
        pair = Image.new("RGB", (2 * tile_w, h + 16), (255, 255, 255))
        pair.paste(a.resize((tile_w, h)), (0, 16))
        pair.paste(Image.fromarray(colorize_depth(depth)).resize((tile_w, h)), (tile_w, 16))
        ImageDraw.Draw(pair).text((4, 2), caption, fill=(0, 0, 0))
        tiles.append(pair)
    rows = (len(tiles) + cols - 1) // cols
    pw, ph = 2 * tile_w, (tile_h or 240) + 16
    grid_w, grid_h = cols * (pw + 8), rows * (ph + 8)
    sheet = Image.new("RGB", (grid_w + top_down.width + 8, max(grid_h, top_down.height)), (255, 255, 255))
    for k, t in enumerate(tiles):
        sheet.paste(t, ((k % cols) * (pw + 8), (k // cols) * (ph + 8)))
    sheet.paste(top_down, (grid_w + 8, 0))
    return sheet


def save_png(img: Image.Image, path: Path) -> None:
    """Write atomically (temp file + rename): a killed run never leaves half a PNG."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".png.tmp")
    os.close(fd)
    try:
        img.save(tmp, format="PNG")
        os.chmod(tmp, 0o644)  # mkstemp creates 0600
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise

"""Why does P-Mon score what it does? Per family, from a run's results store and its data directory:
the monitor's room, height, tilt and distance to the target, the target's pelvis inside the monitor's
frame (at the head camera's field of view, P-Mon's lens before 19d16e0, and at the monitor's own,
which P-Mon renders with since), the mean visible-body fraction of the P-Mon and P-Init clips, and the group Macro-F1 of both
settings on all episodes and on those where both clips show at least half the body.

    .venv/bin/python tools/diagnose_p_mon.py results/bench
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from affectsim_bridge.world.scene import load_scene
from affectsim_core.camera import FETCH_HEAD_CAMERA, CameraIntrinsics
from affectsim_core.errors import AffectSimError
from affectsim_core.geometry import look_at_rotation
from affectsim_core.record import EpisodeRecord
from affectsim_eval.run.config import DATA_DIR
from affectsim_eval.dataset.episodes import load_split
from affectsim_eval.scoring.metrics import compute_all
from affectsim_eval.run.report import REFERENCES
from affectsim_eval.run.store import ResultsStore

PELVIS_HEIGHT_M = 0.9


def _in_frame(k: CameraIntrinsics, local: np.ndarray) -> bool:
    if local[2] <= 0:
        return False
    u, v = k.fx * local[0] / local[2] + k.cx, k.fy * local[1] / local[2] + k.cy
    return 0 <= u < k.width and 0 <= v < k.height


def _group(records: list[EpisodeRecord], setting: str) -> float:
    f1 = compute_all(records, ["macro_f1"])["macro_f1"]
    return float(np.mean([f1[n][setting] for n in records[0].recognizers if n not in REFERENCES]))


def main(run: Path) -> None:
    with ResultsStore.open(run / "results.sqlite") as store:
        meta = store.meta()
        records = [EpisodeRecord.from_dict(r, str(run)) for r in store.records("ok")]
    data = Path(meta.get("data_dir", DATA_DIR))
    episodes = {e.episode_id: e for e in load_split(meta["config"]["split"], data / "episodes")}
    rows: dict[str, list] = defaultdict(list)
    for r in records:
        ep = episodes[r.episode_id]
        scene = load_scene(ep.scene_id, data / "scenes")
        t = next(h for h in ep.humans if h.role == "target")
        here = scene.room_at((t.x, t.y))
        room = next(x for x in scene.rooms if x.id == (ep.monitor_room or here.id))
        mon, aim = np.asarray(room.monitor.position, float), np.asarray(room.monitor.look_at, float)
        local = (np.array([t.x, t.y, PELVIS_HEIGHT_M]) - mon) @ look_at_rotation(mon, aim)
        declared = CameraIntrinsics.from_vfov(FETCH_HEAD_CAMERA.width, FETCH_HEAD_CAMERA.height, room.monitor.vfov)
        tilt = math.degrees(math.atan2(mon[2] - aim[2], float(np.linalg.norm(aim[:2] - mon[:2]))))
        rows[ep.family].append((r.visible["p_mon"], r.visible["p_init"], float(np.linalg.norm(local)),
                                _in_frame(FETCH_HEAD_CAMERA, local), _in_frame(declared, local),
                                here is not None and here.id == room.id, mon[2], tilt))
    for fam, vals in sorted(rows.items()):
        a = np.array(vals, float)
        print(f"{fam}: {len(a)} episodes; monitor in the target's room {100 * a[:, 5].mean():.0f} %, "
              f"{a[:, 6].mean():.1f} m high, tilted {a[:, 7].mean():.0f} deg down, "
              f"{np.median(a[:, 2]):.1f} m from the pelvis [p10 {np.percentile(a[:, 2], 10):.1f}, "
              f"p90 {np.percentile(a[:, 2], 90):.1f}]; pelvis in frame {100 * a[:, 3].mean():.0f} % "
              f"(declared field of view: {100 * a[:, 4].mean():.0f} %); visible P-Mon {a[:, 0].mean():.2f}, "
              f"P-Init {a[:, 1].mean():.2f}; P-Mon < 0.1 visible in {int((a[:, 0] < 0.1).sum())}")
    both = [r for r in records if r.visible["p_mon"] >= 0.5 and r.visible["p_init"] >= 0.5]
    print(f"group Macro-F1, all {len(records)}: P-Init {100 * _group(records, 'p_init'):.1f}, "
          f"P-Mon {100 * _group(records, 'p_mon'):.1f}")
    if both:
        print(f"group Macro-F1, the {len(both)} where both clips show >= 0.5 of the body: "
              f"P-Init {100 * _group(both, 'p_init'):.1f}, P-Mon {100 * _group(both, 'p_mon'):.1f} "
              f"(visible {np.mean([r.visible['p_init'] for r in both]):.2f} / "
              f"{np.mean([r.visible['p_mon'] for r in both]):.2f})")


if __name__ == "__main__":
    if len(sys.argv) > 2:
        raise SystemExit("usage: python tools/diagnose_p_mon.py [RUN_DIR]")
    try:
        main(Path(sys.argv[1] if len(sys.argv) > 1 else "results/bench"))
    except AffectSimError as exc:  # InvalidInput included: one line naming the file, the value and what was expected
        raise SystemExit(f"diagnose_p_mon: error: {exc}") from None
    except KeyError as exc:
        raise SystemExit(f"diagnose_p_mon: error: {exc} is missing from the run's metadata or dataset "
                         "(expected a run of `affectsim eval` or `make bench` on this dataset)") from None

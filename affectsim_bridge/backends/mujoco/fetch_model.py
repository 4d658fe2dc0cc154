"""The Fetch robot as an MJCF fragment, from the meshes and kinematics that gymnasium-robotics ships.

The shipped model mounts the base on three slide joints for a tabletop task; here the
base gets planar joints (x, y, yaw) set kinematically, the arm is tucked as on the
real robot, and every robot geom goes to geom group 2 so the base laser can skip it.
"""

from __future__ import annotations

import copy
import importlib.util
import xml.etree.ElementTree as ET
from pathlib import Path

from affectsim_core.errors import MissingDependency

ROBOT_GROUP = 2
# Fetch's tuck pose (fetch_ros tuck_arm.py): shoulder_pan, shoulder_lift, upperarm_roll,
# elbow_flex, forearm_roll, wrist_flex, wrist_roll (rad)
TUCK = {
    "shoulder_pan_joint": 1.32, "shoulder_lift_joint": 1.40, "upperarm_roll_joint": -0.2,
    "elbow_flex_joint": 1.72, "forearm_roll_joint": 0.0, "wrist_flex_joint": 1.66, "wrist_roll_joint": 0.0,
}
# links published on TF, child -> parent (names of the real Fetch URDF)
TF_TREE = {
    "torso_lift_link": "base_link",
    "head_pan_link": "torso_lift_link",
    "head_tilt_link": "head_pan_link",
    "head_camera_link": "head_tilt_link",
    "head_camera_rgb_frame": "head_camera_link",
    "head_camera_rgb_optical_frame": "head_camera_rgb_frame",
    "head_camera_depth_frame": "head_camera_link",
    "head_camera_depth_optical_frame": "head_camera_depth_frame",
    "laser_link": "base_link",
}
MOVING_LINKS = ("torso_lift_link", "head_pan_link", "head_tilt_link")  # joint-driven: /tf, not /tf_static


def assets_dir() -> Path:
    """Directory holding gymnasium-robotics' ``fetch/`` MJCF and ``stls/fetch`` meshes (not imported)."""
    spec = importlib.util.find_spec("gymnasium_robotics")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependency("mujoco backend", "gymnasium-robotics (Fetch meshes)", "run `make setup`")
    return Path(list(spec.submodule_search_locations)[0]) / "envs" / "assets"


def fetch_mjcf() -> tuple[list[ET.Element], ET.Element, ET.Element]:
    """(mesh and material asset elements, default class element, base body element) for the Fetch."""
    root = assets_dir()
    shared = ET.parse(root / "fetch" / "shared.xml").getroot()
    robot = ET.parse(root / "fetch" / "robot.xml").getroot()
    meshdir = root / "stls" / "fetch"
    assets = []
    for el in shared.find("asset"):
        if el.tag == "mesh":
            el = copy.deepcopy(el)
            el.set("file", str(meshdir / el.get("file")))
            assets.append(el)
        elif el.tag == "material" and el.get("name", "").startswith("robot0:"):
            assets.append(copy.deepcopy(el))
    default = copy.deepcopy(shared.find("default").find("default"))  # class robot0:fetch
    base = copy.deepcopy(robot.find("body[@name='robot0:base_link']"))
    for j in base.findall("joint"):
        base.remove(j)
    base.set("pos", "0 0 0")
    # order matters: slides along map x, y first, then yaw about the moved origin
    for i, attrs in enumerate(({"name": "base_x", "type": "slide", "axis": "1 0 0"},
                               {"name": "base_y", "type": "slide", "axis": "0 1 0"},
                               {"name": "base_yaw", "type": "hinge", "axis": "0 0 1"})):
        base.insert(i, ET.Element("joint", attrs))
    for child in list(base):
        if child.tag == "body" and child.get("name") == "robot0:external_camera_body_0":
            base.remove(child)
    for cam in base.iter("camera"):
        if cam.get("name") == "head_camera_rgb":
            cam.attrib.pop("euler", None)
            cam.set("quat", "0 1 0 0")  # exact pi about x: MuJoCo camera looks along -z
    for geom in base.iter("geom"):
        geom.set("group", str(ROBOT_GROUP))
        geom.set("contype", "0")
        geom.set("conaffinity", "0")
    return assets, default, base

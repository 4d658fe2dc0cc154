"""Names of the ROS interface (docs/design.md §3), defined once for every node and client.

Topic names follow the real Fetch, so a policy moves to the robot unchanged; ``/affectsim/*`` names
exist only in simulation (services, privileged ground truth) or belong to this project's nodes.
"""

from __future__ import annotations

OPTICAL_FRAME = "head_camera_rgb_optical_frame"  # the head camera's optical frame (REP-103: z forward)
HEAD_JOINTS = ("head_pan_joint", "head_tilt_joint")  # the Fetch head's joints, in a head command's order

TOPICS: dict[str, str] = {
    "rgb": "/head_camera/rgb/image_raw",
    "rgb_info": "/head_camera/rgb/camera_info",
    "depth": "/head_camera/depth_registered/image_raw",
    "depth_info": "/head_camera/depth_registered/camera_info",
    "scan": "/base_scan",
    "odom": "/odom",
    "tf": "/tf",
    "tf_static": "/tf_static",
    "map": "/map",
    "clock": "/clock",
    "cmd_vel": "/cmd_vel",
    "head_command": "/head_controller/joint_trajectory",  # ros2_control joint trajectory controller's topic
    "person_detections": "/affectsim/person_detections",
    "gt_robot": "/affectsim/ground_truth/robot_pose",  # privileged
    "gt_humans": "/affectsim/ground_truth/humans",  # privileged
    "gt_reactions": "/affectsim/ground_truth/reactions",  # privileged (reactive humans only)
}

SERVICES: dict[str, str] = {  # services and action servers
    "load_world": "/affectsim/load_world",  # bridge (privileged)
    "apply_action": "/affectsim/apply_action",  # bridge, lockstep only
    "render_views": "/affectsim/render_views",  # bridge (privileged)
    "acquire_observation": "/affectsim/acquire_observation",  # nav
    "search_person": "/affectsim/search_person",  # nav
    "handoff": "/affectsim/handoff",  # nav
    "follow_person": "/affectsim/follow_person",  # nav
    "recognize": "/affectsim/recognize",  # perception
}

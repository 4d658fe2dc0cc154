"""The world the robot is in, ROS-free (level 1 of :mod:`affectsim_bridge`; imports no other part of it).

The scene format (:mod:`~affectsim_bridge.world.scene`: rooms, walls, doors, furniture, cameras; built-in
and generated scene files), the navigable space of a scene for the robot base
(:mod:`~affectsim_bridge.world.navigable`) and the seeded sensor and actuation noise models
(:mod:`~affectsim_bridge.world.noise`, ``NOISE_MODELS``). The scene generator previews its scenes
through a backend and is in :mod:`affectsim_bridge.content`.
"""

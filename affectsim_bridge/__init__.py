"""Level 2: the world (imports ``affectsim_core`` alone).

Scenes (:mod:`~affectsim_bridge.scene`, :mod:`~affectsim_bridge.scene_generator`), navigable space
(:mod:`~affectsim_bridge.navigable`), humans and motion playback (:mod:`affectsim_bridge.humans`),
simulator backends and their registry (:mod:`affectsim_bridge.backends`: ``mujoco`` default,
``habitat`` optional) with the one visibility query ``line_of_sight``, privileged view rendering
(:mod:`~affectsim_bridge.views`), and the bridge node (:mod:`~affectsim_bridge.bridge_node`).
"""

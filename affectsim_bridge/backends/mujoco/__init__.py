"""The MuJoCo backend (the default ``mujoco`` of ``BACKENDS``) and everything only it uses.

:mod:`~affectsim_bridge.backends.mujoco.mujoco_backend` (the backend), the scene compiled to MJCF
(:mod:`~affectsim_bridge.backends.mujoco.mjcf_builder`), the Fetch robot from gymnasium-robotics' meshes
(:mod:`~affectsim_bridge.backends.mujoco.fetch_model`; its TF tree is also the bridge node's) and one-pass
EGL RGB-D rendering (:mod:`~affectsim_bridge.backends.mujoco.renderer`). Importing this package loads
no MuJoCo: the registry imports the backend when one is created.
"""

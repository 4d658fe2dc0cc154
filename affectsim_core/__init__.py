"""Level 1 (ground) of AffectSim-ROS: the protocol's vocabulary, defined once, and plumbing every level uses.

Nothing here imports another AffectSim package. Modules:

- :mod:`~affectsim_core.protocol`: emotions, observation settings, families, challenges, splits,
  clip frames and size, step time and action sizes, budgets, E-SPL radii, :class:`Outcome`;
- :mod:`~affectsim_core.actions`: :class:`Action`, :class:`MoveResult`;
- :mod:`~affectsim_core.camera`: :class:`CameraIntrinsics`, the Fetch head camera;
- :mod:`~affectsim_core.clips`: recognition clips and their frame sampling;
- :mod:`~affectsim_core.observation`: :class:`Observation` / :class:`EpisodeInfo`, the
  privileged-input barrier (what a policy may see);
- :mod:`~affectsim_core.person_tracking`: person detections located by depth (policies and the
  perception node share it);
- :mod:`~affectsim_core.episode`, :mod:`~affectsim_core.record`: typed episodes and records;
- :mod:`~affectsim_core.geometry`, :mod:`~affectsim_core.registry`, :mod:`~affectsim_core.errors`,
  :mod:`~affectsim_core.atomic`, :mod:`~affectsim_core.timing`, :mod:`~affectsim_core.colours`;
- :mod:`affectsim_core.ros`: ROS plumbing shared by every node (import only where ROS is used).
"""

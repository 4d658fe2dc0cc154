"""Level 3: how the observer moves, with non-privileged inputs only (imports ``affectsim_core`` alone).

Policies and their registry (:mod:`~affectsim_nav.policy`; the ``baseline`` frontier search,
:mod:`~affectsim_nav.baseline`; ``viewpoint``, the baseline choosing its view, :mod:`~affectsim_nav.viewpoint`),
the discrete executor and budgets (:mod:`~affectsim_nav.executor`), the grid planner
(:mod:`~affectsim_nav.planner`), the active loop shared by the in-process evaluation and the nav node
(:mod:`~affectsim_nav.active`), the nav node with its ROS robot and Nav2 adapter (:mod:`~affectsim_nav.nav_node`,
:mod:`~affectsim_nav.ros_robot`, :mod:`~affectsim_nav.nav2_mover`).

Importing the package registers the shipped policies.
"""

from affectsim_nav import baseline, viewpoint  # noqa: F401  (register the shipped policies)

"""Level 3: how the observer moves, with non-privileged inputs only (imports ``affectsim_core`` alone).

Policies and their registry (:mod:`~affectsim_nav.policy`; the ``baseline`` frontier search,
:mod:`~affectsim_nav.baseline`; ``viewpoint``, the baseline choosing its view, :mod:`~affectsim_nav.viewpoint`;
``viewpoint-rec``, that policy asking a frozen recognizer whether a view is good enough, the one policy with a
recognizer in the loop, :mod:`~affectsim_nav.recognizer_loop`),
the discrete executor and budgets (:mod:`~affectsim_nav.executor`), the grid planner
(:mod:`~affectsim_nav.planner`), the active loop shared by the in-process evaluation and the nav node
(:mod:`~affectsim_nav.active`), the nav node with its ROS robot and Nav2 adapter (:mod:`~affectsim_nav.nav_node`,
:mod:`~affectsim_nav.ros_robot`, :mod:`~affectsim_nav.nav2_mover`).

Importing the package registers the shipped policies.
"""

from affectsim_nav import baseline, recognizer_loop, viewpoint  # noqa: F401  (register the shipped policies)

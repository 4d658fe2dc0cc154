"""Level 2: the world (imports ``affectsim_core`` alone).

Its parts are sub-packages on levels of their own (``tools/import_graph.py``, ``DEFAULT_SUBLEVELS``):
a sub-package imports only sub-packages on lower levels, never a peer, and never the package's root
modules, which are the top.

====  ==========================================  ======================================================
1     :mod:`~affectsim_bridge.humans`             affective humans: skeleton, bodies, motion clips, the
                                                  procedural generator, evolving affect, BVH, features,
                                                  reactive people
1     :mod:`~affectsim_bridge.world`              the scene format, navigable space, sensor and actuation
                                                  noise models (``NOISE_MODELS``)
2     :mod:`~affectsim_bridge.backends`           simulator backends in ``BACKENDS`` (``mujoco`` default,
                                                  in ``backends/mujoco/`` with its MJCF builder, renderer
                                                  and Fetch model; ``habitat`` optional) with the one
                                                  visibility query ``line_of_sight``
3     :mod:`~affectsim_bridge.content`            what the simulator plays, built, checked and previewed:
                                                  the motion library, its validation, motion previews,
                                                  the 57 procedural scenes
root  :mod:`~affectsim_bridge.bridge_node`,       the bridge node, its simulator thread
      :mod:`~affectsim_bridge.simulator_thread`,  (one thread owns the backend) and the privileged views
      :mod:`~affectsim_bridge.views`              (``render_views``: the node's ``RenderViews`` service
                                                  and the in-process evaluation call the same function)
====  ==========================================  ======================================================

Where the import clusters differ from a first sketch: the backend interface
(:mod:`affectsim_bridge.backends.base`) is built from humans (bodies, motion, reactions) and the world
(scene, navigable space), so both sit below ``backends/``; the modules that need a backend or its
``HumanPlacement`` — the motion library (dyadic placements), its validation (it loads the library),
the motion previews and the scene generator (scene previews) — are ``content/``, above it, and
``humans/`` and ``world/`` keep only what the backends build on. The node's modules stay at the
package root like every package's node (``affectsim_nav.nav_node``, ``affectsim_eval.evaluator_node``);
``views`` is with them although the in-process evaluation uses it too, because it renders from any
backend the way the node's service does.
"""

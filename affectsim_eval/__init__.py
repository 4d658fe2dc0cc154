"""Level 4: everything privileged or orchestrating (imports levels 1-3).

Its parts are sub-packages on levels of their own (``tools/import_graph.py``, ``DEFAULT_SUBLEVELS``):
a sub-package imports only sub-packages on lower levels, never a peer, and never the package's root
modules, which are the top.

====  ============================================  ====================================================
1     :mod:`~affectsim_eval.scoring`                metrics (``METRICS``, Table 6 included), measures of
                                                    evolving affect and VAD, the paper's published values
2     :mod:`~affectsim_eval.episode`                one episode: passive settings and the reference
                                                    observer, the one orchestrator over an ``EvalWorld``
                                                    (in-process or the ROS graph), social measures,
                                                    window streams, MCAP recording
3     :mod:`~affectsim_eval.dataset`                the episode dataset: storage, composer, build,
                                                    splits, validation, counterfactuals, fingerprint
4     :mod:`~affectsim_eval.training`               recognizer training data and training
4     :mod:`~affectsim_eval.run`                    a benchmark run: configuration, the one episode loop,
                                                    in-process workers and Ray shards, results store,
                                                    the report
5     :mod:`~affectsim_eval.gym`                    the Gymnasium environment over the in-process world
                                                    (``affectsim/ActiveObservation-v0``), its rewards
root  :mod:`~affectsim_eval.evaluator_node`         the evaluator node (the run through the ROS graph)
====  ============================================  ====================================================

Where the import clusters differ from a first sketch: the report (:mod:`affectsim_eval.run.report`)
is in ``run/``, not ``scoring/``, because it reads a run's results store and configuration, while
the orchestrator of ``episode/`` scores each episode with ``scoring/`` (``d_star``); ``scoring/`` is
then below ``episode/`` and ``run/`` above both. The evaluator node stays at the root like every
package's node (``affectsim_bridge.bridge_node``, ``affectsim_nav.nav_node``): it imports ``run/``
(loop, report) and ``episode/`` (the ROS world). ``training/`` and ``run/`` import nothing of each
other, so they share level 4. ``gym/`` builds on a run's data and the episode's world, so it is above
``run/``.
"""

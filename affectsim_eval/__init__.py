"""Level 4: everything privileged or orchestrating (imports levels 1-3).

The dataset (:mod:`affectsim_eval.dataset`: storage, composer, build, splits, validation), the passive
settings and the reference observer (:mod:`~affectsim_eval.passive`, :mod:`~affectsim_eval.reference`),
the one episode orchestrator over an :class:`~affectsim_eval.worlds.EvalWorld`
(:mod:`~affectsim_eval.orchestrator`; in-process :mod:`~affectsim_eval.worlds`, ROS
:mod:`~affectsim_eval.ros_world`), the one episode loop (:mod:`~affectsim_eval.loop`) with in-process
workers and Ray shards (:mod:`~affectsim_eval.runner`, :mod:`~affectsim_eval.ray_shards`), run
configuration (:mod:`~affectsim_eval.config`), results store, metrics, report, MCAP recording,
recognizer training data and training, and the evaluator node.
"""

"""A benchmark run (level 4 of :mod:`affectsim_eval`; imports ``dataset``, ``episode``, ``scoring``).

What defines a run (:mod:`~affectsim_eval.run.config`: configuration, episodes, metadata, data), the one
episode loop of every run (:mod:`~affectsim_eval.run.loop`), in-process workers and Ray shards
(:mod:`~affectsim_eval.run.runner`, :mod:`~affectsim_eval.run.ray_shards`), the results store
(:mod:`~affectsim_eval.run.store`) and the report written from it (:mod:`~affectsim_eval.run.report`).
"""

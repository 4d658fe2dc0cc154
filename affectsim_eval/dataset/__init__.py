"""The episode dataset: schema and storage, composer, splits and build (level 3 of :mod:`affectsim_eval`;
imports ``episode``: the composer uses the reference observer's viewpoint grid, validation
re-observes episodes with the passive settings).
"""

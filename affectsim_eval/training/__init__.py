"""Recognizer training (level 4 of :mod:`affectsim_eval`; imports ``dataset``, ``episode``, ``scoring``).

``affectsim train``: training clips rendered from a dataset split (:mod:`~affectsim_eval.training.training_data`),
training on train, selection on val and freezing (:mod:`~affectsim_eval.training.train`), the networks'
PyTorch fitting (:mod:`~affectsim_eval.training.fitting`) and the VAD heads' fit
(:mod:`~affectsim_eval.training.vad_fit`).
"""

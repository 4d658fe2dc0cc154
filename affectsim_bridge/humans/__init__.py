"""Affective humans: skeleton, performer bodies, avatar geometry, motion clips."""

# AffectSim-ROS: the two commands are `make bench` (main job) and `make test`.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
export ROS_AUTOMATIC_DISCOVERY_RANGE := LOCALHOST
export MUJOCO_GL := egl
export PYOPENGL_PLATFORM := egl

.PHONY: setup test test-all bench clean

setup:  ## idempotent: venv, pinned deps, EGL libs, interfaces (see tools/setup.sh)
	bash tools/setup.sh

test: setup  ## fast suite (< 10 min on 2 cores); slow tests run in `make test-all`
	$(PY) -m pytest -q -m "not slow" test

test-all: setup
	$(PY) -m pytest -q test

bench: setup  ## world tour over ROS (contact sheet) + simulator benchmark; builds the motion library if missing
	test -f data/motions/manifest.json || $(VENV)/bin/affectsim motions build
	$(VENV)/bin/affectsim tour --out results/tour
	$(VENV)/bin/affectsim bench sim --out results/bench_sim.json

clean:
	rm -rf build results .pytest_cache

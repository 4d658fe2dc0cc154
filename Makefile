# AffectSim-ROS: the two commands are `make bench` (main job) and `make test`.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
# DDS on loopback: the project's Fast DDS profile; the discovery-range variable would open sockets on every interface
unexport ROS_AUTOMATIC_DISCOVERY_RANGE
export FASTDDS_DEFAULT_PROFILES_FILE := $(CURDIR)/config/fastdds_loopback.xml
export MUJOCO_GL := egl
export PYOPENGL_PLATFORM := egl

.PHONY: setup test test-all dataset-check bench clean

setup:  ## idempotent: venv, pinned deps, EGL libs, interfaces (see tools/setup.sh)
	bash tools/setup.sh

# pytest worker processes of `make test`'s second phase (each test file runs whole in one of them; 0: in this
# process). The first phase runs the tests marked `serial` alone: they keep wall-clock time (a free-running
# executor's overshoot, the stand-in robot's odometry), which a second worker's graphs disturb on 2 cores
TEST_WORKERS ?= 2
test: setup  ## fast suite (< 10 min on 2 cores); slow tests run in `make test-all`
	$(PY) -m pytest -q -m "serial and not slow" test
	$(PY) -m pytest -q -m "not serial and not slow" $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile) test

test-all: setup
	$(PY) -m pytest -q test

dataset-check: setup  ## rebuild a small dataset from scratch (~4 min) and compare its hashes with config/dataset_reference.json; compose a sample of the shipped dataset's jobs again and compare
	$(VENV)/bin/affectsim dataset fingerprint

# stratified test episodes of the run (unset: the bench graph's default, 160); all: the whole test split
BENCH_EPISODES ?=
# bench graphs side by side, each on its own ROS domain and part of the episodes (the records are the same)
BENCH_GRAPHS ?= 2
bench: setup  ## the main job: the benchmark through the ROS graph on a stratified test subset, then report.md
	test -f data/motions/manifest.json || $(VENV)/bin/affectsim motions build
	test -f data/scenes/manifest.json || $(VENV)/bin/affectsim scenes build
	test -f data/episodes/manifest.json || $(VENV)/bin/affectsim dataset install
	$(VENV)/bin/affectsim launch bench $(if $(BENCH_EPISODES),episodes:=$(if $(filter all,$(BENCH_EPISODES)),0,$(BENCH_EPISODES))) graphs:=$(BENCH_GRAPHS) output_dir:=results/bench passive_cache:=data/cache/passive
	@echo "report: results/bench/report.md"

clean:
	rm -rf build results .pytest_cache

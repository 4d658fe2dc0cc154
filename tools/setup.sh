#!/usr/bin/env bash
# One-command, idempotent setup of the AffectSim-ROS workspace (called by `make setup`).
#   - Debian packages for headless EGL rendering (installed when missing, as root)
#   - .venv (Python 3.11) with pinned dependencies; ROS 2 Kilted wheels unless a sourced
#     ROS 2 distribution already provides rclpy (then the venv sees its packages)
#   - affectsim_interfaces (and tf2_msgs when none is importable) built with CMake into .venv
#   - the affectsim package (editable) with its console script `affectsim`
# A second run on a set-up machine only checks stamps and finishes in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=$ROOT/.venv
PY=${PYTHON:-python3.11}
say() { printf '[setup] %s\n' "$*"; }
hash_of() { cat "$@" | sha256sum | cut -c1-16; }

# 1. headless rendering libraries
APT_PKGS="libegl1 libgl1-mesa-dri libglvnd0 cmake g++ make"
missing=$(for p in $APT_PKGS; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ]; then
    say "installing Debian packages: $missing"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  else
    echo "[setup] missing Debian packages: $missing" >&2
    echo "[setup] run: sudo apt-get update && sudo apt-get install -y $missing" >&2
    exit 1
  fi
fi

# 2. virtual environment
SYSTEM_ROS=0
if [ -n "${ROS_DISTRO:-}" ] && $PY -c "import rclpy" >/dev/null 2>&1; then
  SYSTEM_ROS=1
  say "using the sourced ROS 2 $ROS_DISTRO (rclpy importable); skipping ROS wheels"
fi
if ! command -v "$PY" >/dev/null; then
  echo "[setup] $PY not found: AffectSim-ROS needs Python 3.11 (PYTHON=... to choose another binary)" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV"
  if [ $SYSTEM_ROS = 1 ]; then $PY -m venv --system-site-packages "$VENV"; else $PY -m venv "$VENV"; fi
fi
REQS="requirements.txt"
[ $SYSTEM_ROS = 1 ] || REQS="$REQS requirements-ros.txt"
stamp="$VENV/.affectsim-reqs-$(hash_of $REQS setup.py)"
if [ ! -f "$stamp" ]; then
  say "installing pinned Python dependencies"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  for r in $REQS; do "$VENV/bin/python" -m pip install -q -r "$r"; done
  "$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation -e .
  rm -f "$VENV"/.affectsim-reqs-*; touch "$stamp"
fi

# 3. interfaces (CMake into the venv prefix)
build_iface() {  # $1 source dir, $2 python module to check (e.g. affectsim_interfaces.msg)
  local src=$1 mod=$2
  local st="$VENV/.affectsim-iface-$(basename "$src")-$(hash_of $(find "$src" -type f | sort))"
  if [ -f "$st" ] && "$VENV/bin/python" -c "import $mod" >/dev/null 2>&1; then return; fi
  say "building $(basename "$src") into $VENV"
  local prefix_path=$VENV
  [ $SYSTEM_ROS = 1 ] && prefix_path="$VENV;${AMENT_PREFIX_PATH//:/;}"
  if [ $SYSTEM_ROS = 0 ]; then  # the wheels' CMake exports name the build machine's Python
    local pyinc numinc
    pyinc=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
    numinc=$("$VENV/bin/python" -c "import numpy; print(numpy.get_include())")
    { grep -l "/opt/python/cp311-cp311" "$VENV"/share/*/cmake/*.cmake 2>/dev/null || true; } | while read -r f; do
      sed -i "s#/opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include#$numinc#g; s#/opt/python/cp311-cp311/include/python3.11#$pyinc#g" "$f"
    done
  fi
  local bdir="$ROOT/build/$(basename "$src")"
  rm -rf "$bdir"; mkdir -p "$bdir"
  ( cd "$bdir" && PATH="$VENV/bin:$PATH" cmake "$src" -DCMAKE_PREFIX_PATH="$prefix_path" \
      -DCMAKE_INSTALL_PREFIX="$VENV" -DPython3_EXECUTABLE="$VENV/bin/python" -DBUILD_TESTING=OFF \
      -DCMAKE_INSTALL_RPATH="$VENV/lib" -DCMAKE_BUILD_TYPE=Release >"$bdir/cmake.log" 2>&1 \
    && PATH="$VENV/bin:$PATH" make -j"$(nproc)" >"$bdir/make.log" 2>&1 && make install >"$bdir/install.log" 2>&1 ) || {
      echo "[setup] building $src failed; see $bdir/*.log" >&2; tail -20 "$bdir"/*.log >&2; exit 1; }
  "$VENV/bin/python" -c "import $mod" || { echo "[setup] $mod built but does not import" >&2; exit 1; }
  rm -f "$VENV"/.affectsim-iface-"$(basename "$src")"-*; touch "$st"
}
if [ $SYSTEM_ROS = 1 ] && "$VENV/bin/python" -c "import tf2_msgs.msg" >/dev/null 2>&1; then
  say "tf2_msgs provided by ROS $ROS_DISTRO"
elif "$VENV/bin/python" -c "import tf2_msgs.msg" >/dev/null 2>&1 && [ ! -f "$VENV/.affectsim-vendored-tf2" ]; then
  say "tf2_msgs already importable"
else
  build_iface "$ROOT/tf2_msgs_vendor" tf2_msgs.msg && touch "$VENV/.affectsim-vendored-tf2"
fi
build_iface "$ROOT/affectsim_interfaces" affectsim_interfaces.action
# Nav2's NavigateToPose type for the delegation test, only where no Nav2 is installed
if "$VENV/bin/python" -c "import nav2_msgs.action" >/dev/null 2>&1 && [ ! -f "$VENV/.affectsim-vendored-nav2" ]; then
  say "nav2_msgs provided by the ROS installation"
else
  build_iface "$ROOT/test/nav2_msgs" nav2_msgs.action && touch "$VENV/.affectsim-vendored-nav2"
fi

# 4. smoke check: everything the project imports, with DDS on loopback
FASTDDS_DEFAULT_PROFILES_FILE="$ROOT/config/fastdds_loopback.xml" ROS_DOMAIN_ID=0 MUJOCO_GL=egl \
  env -u ROS_AUTOMATIC_DISCOVERY_RANGE "$VENV/bin/python" - <<'PY'
import rclpy, tf2_msgs.msg, affectsim_interfaces.srv, mujoco, affectsim_bridge, affectsim_ros
from affectsim_bridge.backends.mujoco.fetch_model import assets_dir
assert (assets_dir() / "fetch" / "robot.xml").is_file()
print(f"[setup] ok: rclpy, tf2_msgs, affectsim_interfaces, mujoco {mujoco.__version__}, Fetch model")
PY

"""ament_python package ``affectsim``: installs the six Python packages (levels 1-5), console scripts, launch and config."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "affectsim"
VERSION = "0.1.0"  # keep equal to package.xml (checked by test/test_packaging.py)

setup(
    name=PACKAGE,
    version=VERSION,
    packages=find_packages(include=["affectsim_core*", "affectsim_bridge*", "affectsim_nav*", "affectsim_perception*",
                                    "affectsim_eval*", "affectsim_ros*"]),
    package_data={"affectsim_bridge": ["scenes/*.yaml"], "affectsim_perception": ["checkpoints/*/*"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml") + glob("config/*.xml") + glob("config/*.json")),
    ],
    install_requires=["setuptools"],
    zip_safe=False,
    maintainer="AffectSim-ROS maintainers",
    maintainer_email="maintainers@affectsim.dev",
    description="ROS 2 stack and benchmark for embodied affective perception",
    license="Apache-2.0",
    python_requires=">=3.10",
    entry_points={
        "console_scripts": [
            "affectsim = affectsim_ros.cli:main",
            "bridge_node = affectsim_ros.nodes:bridge_main",
            "nav_node = affectsim_ros.nodes:nav_main",
            "perception_node = affectsim_ros.nodes:perception_main",
            "evaluator_node = affectsim_ros.nodes:evaluator_main",
        ],
    },
)

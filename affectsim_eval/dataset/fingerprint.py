"""``affectsim dataset fingerprint``: rebuild a small dataset from scratch and compare its hashes with
the committed reference, so that any code change that alters the dataset is noticed (CI runs it).

The motion library, the scenes and the episodes (at :data:`SCALE` of the paper's counts) are built
from the code alone into a temporary directory, exactly as ``make bench`` builds them at full scale;
the build is deterministic, so its dataset version and split hashes are a fingerprint of every
generator. A deliberate change is recorded with ``--update`` (commit the new reference, and retrain
the checkpoints on the new full build: the evaluator refuses checkpoints of another version), and
ship the new full build (``affectsim dataset build && affectsim dataset ship``): with the freshly
built libraries, a sample of the shipped dataset's jobs is composed again and compared
(:mod:`~affectsim_eval.dataset.shipped`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable

from affectsim_bridge.content import library
from affectsim_bridge.content.scene_generator import build_scenes
from affectsim_core.atomic import write_json
from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import SPLITS
from affectsim_core.readers import read_json
from affectsim_eval.dataset.build import build_dataset
from affectsim_eval.dataset.shipped import SHIPPED_DIR, verify

REFERENCE = Path(__file__).resolve().parents[2] / "config" / "dataset_reference.json"
SCALE = 0.05  # of the paper's episode counts: 1,382 episodes over all 57 scenes
MAX_REFERENCE_BYTES = 64 * 2 ** 10  # the reference file (~0.5 KB)


def fingerprint(seed: int = 0, scale: float = SCALE, work: Path | None = None,
                log: Callable[[str], None] = print) -> dict:
    """Build motions, scenes and episodes into ``work`` (a temporary directory by default); the
    dataset's version and split hashes."""
    with tempfile.TemporaryDirectory(prefix="affectsim-fingerprint-") as tmp:
        root = Path(work or tmp)
        library.build(root / "motions", seed=seed, log=log)
        build_scenes(root / "scenes", seed=seed, log=log)
        m = build_dataset(root / "episodes", seed=seed, scale=scale, motions=root / "motions",
                          scenes_dir=root / "scenes", log=log)
    return {"seed": seed, "scale": scale, "version": m["version"],
            "episodes": {s: m["splits"][s]["episodes"] for s in SPLITS},
            "splits_sha256": {s: m["splits"][s]["sha256"] for s in SPLITS}}


def read_reference(path: Path = REFERENCE) -> dict:
    """The committed reference, checked (size, JSON, fields)."""
    if not path.is_file():
        raise InvalidInput("dataset reference", str(path), "a file written by `affectsim dataset fingerprint --update`")
    ref = read_json(path, MAX_REFERENCE_BYTES, "dataset reference")
    for key in ("seed", "scale", "version", "splits_sha256"):
        if not isinstance(ref, dict) or key not in ref:
            raise InvalidInput(f"dataset reference.{key}", None, "a recorded value", where=str(path))
    return ref


def differences(built: dict, reference: dict) -> list[str]:
    """One line per hash that differs (naming both), empty when the build matches the reference."""
    out = []
    if built["version"] != reference["version"]:
        out.append(f"dataset version: built {built['version']}, reference {reference['version']}")
    for s in SPLITS:
        b, r = built["splits_sha256"].get(s), reference["splits_sha256"].get(s)
        if b != r:
            out.append(f"{s} split SHA-256: built {b}, reference {r} "
                       f"({built['episodes'].get(s)} vs {reference.get('episodes', {}).get(s)} episodes)")
    return out


def check(update: bool = False, path: Path = REFERENCE, shipped: Path | None = SHIPPED_DIR,
          log: Callable[[str], None] = print) -> list[str]:
    """Rebuild at the reference's seed and scale and compare; with ``update``, write the build as the
    new reference. Then, with the freshly built libraries, compose a sample of the ``shipped``
    dataset's jobs again (:func:`~affectsim_eval.dataset.shipped.verify`). Returns the differences
    (empty: the code builds the committed dataset and the shipped episodes)."""
    ref = None if update and not path.is_file() else read_reference(path)
    with tempfile.TemporaryDirectory(prefix="affectsim-fingerprint-") as tmp:
        work = Path(tmp)
        built = fingerprint(ref["seed"] if ref else 0, ref["scale"] if ref else SCALE, work=work, log=lambda m: None)
        diff = differences(built, ref) if ref else ["no reference yet"]
        if update:
            write_json(path, built, indent=1)
            log(f"[dataset] reference {path} set to version {built['version']}")
            diff = []
        if shipped is not None:
            try:
                diff += [f"shipped episodes: {d}" for d in verify(shipped, work / "motions", work / "scenes", log=log)]
            except InvalidInput as exc:
                diff.append(f"shipped episodes: {exc}")
    for line in diff:
        log(f"[dataset] DIFFERS {line}")
    if not diff:
        log(f"[dataset] the code builds the reference dataset: version {built['version']} "
            f"(scale {built['scale']}, {sum(built['episodes'].values())} episodes)")
    return diff

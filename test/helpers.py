"""Small hand-made scenes, and a local OpenAI-compatible server, for tests."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from affectsim_bridge.world.scene import parse_scene
from affectsim_core.protocol import EMOTIONS, SETTINGS
from affectsim_core.record import EpisodeRecord

A, F, H, N, S = EMOTIONS

MATERIALS = {"floor": {"rgba": [0.6, 0.5, 0.4, 1]}, "wall": {"rgba": [0.9, 0.9, 0.9, 1]},
             "door": {"rgba": [0.5, 0.3, 0.2, 1]}, "cabinet": {"rgba": [0.8, 0.1, 0.1, 1]}}


def box_room(walls_extra=(), furniture=(), w=6.0, h=4.0, rooms=None):
    """A w x h room enclosed by four walls, plus extra walls and furniture."""
    doc = {
        "format": "affectsim-scene/1", "id": "box", "materials": MATERIALS,
        "rooms": rooms or [{"id": "room", "polygon": [[0, 0], [w, 0], [w, h], [0, h]]}],
        "walls": [{"from": [0, 0], "to": [w, 0]}, {"from": [w, 0], "to": [w, h]}, {"from": [w, h], "to": [0, h]},
                  {"from": [0, h], "to": [0, 0]}, *walls_extra],
        "furniture": list(furniture),
    }
    return parse_scene(doc, "test-scene")


class Server:
    """127.0.0.1 only. ``script`` is a list of replies: (status, content or None, delay s)."""

    def __init__(self, responder=None) -> None:
        """``responder(body) -> content``: the reply to every request the script does not cover."""
        self.requests, self.script = [], []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, self.headers.get("Authorization"), body))
                default = (200, responder(body) if responder else "neutral", 0.0)
                status, content, delay = outer.script.pop(0) if outer.script else default
                threading.Event().wait(delay)
                payload = {"choices": [{"message": {"role": "assistant", "content": content}}]} if status == 200 \
                    else {"error": "scripted"}
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _diag(handoff, path, before, budget, attempted, clipped):
    return {"handoff": handoff, "handoff_step": 5 if handoff else None, "path_length": path,
            "path_before_handoff": before, "budget_exhausted": budget, "attempted_translations": attempted,
            "clipped_translations": clipped, "actions": 100, "planner_calls": 3}


def typed(records: list[dict]) -> list[EpisodeRecord]:
    """The hand-made records (only what the metrics read) completed into validated EpisodeRecords."""
    out = []
    for r in records:
        preds = r["predictions"]
        out.append(EpisodeRecord.from_dict({
            "episode_id": r["episode_id"], "scene_id": "scene_000", "family": r["family"], "challenge": "",
            "action": "walk", "label": r["label"], "predictions": preds,
            "probs": {k: {s: [0.2] * 5 for s in v} for k, v in preds.items()},
            "outcomes": {k: {s: "ok" for s in v} for k, v in preds.items()},
            "a_obs": {"outcome": "handoff", "message": "", "trajectory": [], **r["a_obs"]},
            "p_ref": None, "visible": {}, "d_star": r["d_star"], "anchor": [0.0, 0.0], "start": [0.0, 0.0, 0.0],
            **({"streams": r["streams"]} if "streams" in r else {}),
            **({"social": r["social"]} if "social" in r else {})}))
    return out


ANGRY_VAD, HAPPY_VAD, SAD_VAD = [-0.51, 0.59, 0.25], [0.81, 0.51, 0.46], [-0.63, -0.27, -0.33]


def evolving_records() -> list[dict]:
    """Two evolving episodes, the worked example of docs/affect.md: windows every second over [0, 10);
    1: angry then happy at 5 s, predicted with the change at 4 s; 2: sad throughout, predicted sad
    then neutral from 3 s. Recognizer "a" also rates VAD (truth + 0.1 valence; one window without)."""
    times = [k + 0.5 for k in range(10)]
    eps = [("angry", [[0, 5, A], [5, 10, H]], [A] * 4 + [H] * 6, [ANGRY_VAD] * 5 + [HAPPY_VAD] * 5),
           ("sad", [[0, 10, S]], [S] * 3 + [N] * 7, [SAD_VAD] * 10)]
    out = []
    for i, (label, segs, pred, vad) in enumerate(eps):
        rated = [[v[0] + 0.1, v[1], v[2]] for v in vad]
        rated[3] = None if i == 1 else rated[3]
        labels = {rec: {x: pred for x in SETTINGS} for rec in ("a", "b")}
        out.append({"episode_id": f"ev{i}", "family": "evolving", "label": segs[-1][2],
                    "predictions": {rec: {x: pred[-1] for x in SETTINGS} for rec in ("a", "b")},
                    "a_obs": {"path_length": 1.0, "fallback": False, "diagnostics": _diag(True, 1.0, 1.0, False, 4, 0)},
                    "d_star": {"1": 1.0, "3": None, "5": None},
                    "streams": {"start": 0.0, "end": 10.0, "times": times, "segments": segs, "vad": vad,
                                "labels": labels, "pred_vad": {"a": {"p_init": rated, "a_obs": rated}}}})
    return out


def hand_made_records() -> list[dict]:
    """Four paired records by hand (only what the metrics read; :func:`typed` completes them)."""
    labels = [A, H, S, N]
    preds = {"a": {"p_init": [H, H, None, S], "p_ref": labels, "p_mon": [None] * 4, "a_obs": [A, H, S, S]},
             "b": {"p_init": labels, "p_ref": labels, "p_mon": labels, "a_obs": [None] * 4}}
    lengths = [2.0, 0.0, 5.0, 1.0]
    stars = {"1": [1.0, 0.0, None, 2.0], "3": [None] * 4, "5": [4.0, 3.0, 5.0, 1.0]}
    diags = [_diag(True, 2.0, 1.0, False, 10, 1), _diag(False, 0.0, 0.0, True, 0, 0),
             _diag(True, 5.0, 5.0, False, 20, 2), _diag(False, 1.0, 1.0, True, 10, 1)]
    return [{"episode_id": f"ep{i}", "family": "action_grounded", "label": labels[i],
             "predictions": {rec: {s: v[i] for s, v in p.items()} for rec, p in preds.items()},
             "a_obs": {"path_length": lengths[i], "fallback": False, "diagnostics": diags[i]},
             "d_star": {r: v[i] for r, v in stars.items()}} for i in range(4)]


def social_records() -> list[dict]:
    """The hand-made records with social measures, as among reactive people: the target noticed the
    robot in every other episode, reacted 0.5 s more each episode; one contact in episodes 1 and 3."""
    out = hand_made_records()
    for i, r in enumerate(out):
        r["episode_id"] = f"so{i}"
        r["social"] = {"min_gap_m": 0.3 + 0.1 * i, "intimate_pct": 5.0 * i, "personal_pct": 10.0 + i, "contacts": i % 2,
                       "people": [{"id": "target", "emotion": r["label"], "noticed_at": None if i % 2 else 1.5,
                                   "reacting_s": 0.5 * i, "path_m": 0.2 * i, "max_shift_m": 0.1 * i,
                                   "blocked_steps": 0}]}
    return out


def episode_ids(data, family: str, n: int = 1, split: str = "test") -> tuple[str, ...]:
    """The first ``n`` ids (in id order: ids are opaque) of ``family``'s episodes in the ``split`` of the
    dataset under the data directory ``data`` (``data/episodes``)."""
    from affectsim_eval.dataset.episodes import load_split

    ids = sorted(e.episode_id for e in load_split(split, data / "episodes") if e.family == family)
    assert len(ids) >= n, f"{split} has {len(ids)} {family} episodes, a test asked for {n}"
    return tuple(ids[:n])

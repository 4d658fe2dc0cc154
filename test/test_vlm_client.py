"""The vlm-openai recognizer against a local server that speaks the OpenAI chat-completions protocol."""

import base64
import io

import numpy as np
import pytest
from helpers import Server
from PIL import Image

from affectsim_perception.recognizers import RECOGNIZERS, ClipInput
from affectsim_perception.recognizers.base import StreamInput
from affectsim_perception.recognizers.vlm_openai import parse_label, parse_vad


@pytest.fixture()
def server():
    s = Server()
    yield s
    s.close()


def clip(seed=0):
    return ClipInput(np.random.default_rng(seed).integers(0, 255, (8, 224, 224, 3), dtype=np.uint8))


def test_request_format_answer_parsing_and_cache(server, tmp_path):
    vlm = RECOGNIZERS.create("vlm-openai", base_url=server.url, model="qwen-test", api_key="k", timeout=5,
                             cache_dir=tmp_path / "cache")
    server.script = [(200, "The person appears **sad**.", 0.0)]
    p = vlm.predict(clip())
    assert p.outcome == "ok" and p.label == "sad" and p.probs.sum() == pytest.approx(1.0)
    path, auth, body = server.requests[0]
    assert path == "/v1/chat/completions" and auth == "Bearer k" and body["model"] == "qwen-test"
    parts = body["messages"][0]["content"]
    images = [x for x in parts if x["type"] == "image_url"]
    assert len(images) == 8 and "angry, fearful, happy, neutral, sad" in parts[0]["text"]
    img = Image.open(io.BytesIO(base64.b64decode(images[0]["image_url"]["url"].split(",", 1)[1])))
    assert img.size == (224, 224)
    assert vlm.predict(clip()).label == "sad" and len(server.requests) == 1  # memory cache
    again = RECOGNIZERS.create("vlm-openai", base_url=server.url, model="qwen-test", cache_dir=tmp_path / "cache")
    assert again.predict(clip()).label == "sad" and len(server.requests) == 1  # disk cache


def test_nonsense_errors_timeouts_and_retries(server):
    vlm = RECOGNIZERS.create("vlm-openai", base_url=server.url, timeout=0.5, retries=1, backoff=0.01)
    server.script = [(200, "a banana", 0.0)]
    p = vlm.predict(clip(1))
    assert p.outcome == "unparseable" and p.label is None and "banana" in p.detail
    server.script = [(500, None, 0.0), (200, "Answer: happy", 0.0)]
    assert vlm.predict(clip(2)).label == "happy"  # retried after the 500
    server.script = [(200, "angry", 2.0), (200, "angry", 2.0)]
    p = vlm.predict(clip(3))
    assert p.outcome == "error" and "2 attempts" in p.detail and p.probs.sum() == pytest.approx(1.0)
    server.script = [(400, None, 0.0)]
    assert vlm.predict(clip(4)).outcome == "error"  # client errors are not retried
    server.script = [(200, "sad " * 1_500_000, 0.0)]  # a 6 MB reply: refused after reading 1 MiB
    p = vlm.predict(clip(6))
    assert p.outcome == "error" and "over 1048576 bytes" in p.detail
    dead = RECOGNIZERS.create("vlm-openai", base_url="http://127.0.0.1:9/v1", timeout=0.5, retries=0)
    assert dead.predict(clip(5)).outcome == "error"


@pytest.mark.parametrize("text,label", [
    ("sad", "sad"), ('{"emotion": "Fearful"}', "fearful"), ("```json\n{\"label\": \"happy\"}\n```", "happy"),
    ("Answer: neutral.", "neutral"), ("The person looks scared.", "fearful"), ("They seem joyful!", "happy"),
    ("not angry, rather sad", "sad"), ("angry or sad", None), ("I cannot tell.", None), ("", None)])
def test_answer_parsing(text, label):
    assert parse_label(text) == label


def test_vad_is_asked_for_parsed_from_the_answer_and_absent_when_incomplete(server):
    vlm = RECOGNIZERS.create("vlm-openai", base_url=server.url, timeout=5)
    assert vlm.estimates_vad
    server.script = [(200, '{"emotion": "fearful", "valence": -0.6, "arousal": 0.7, "dominance": -0.4}', 0.0)]
    p = vlm.predict(clip(10))
    assert p.label == "fearful" and p.vad.tolist() == [-0.6, 0.7, -0.4] and p.as_dict()["vad"] == [-0.6, 0.7, -0.4]
    text = server.requests[0][2]["messages"][0]["content"][0]["text"]
    assert all(w in text for w in ("valence", "arousal", "dominance", "JSON"))
    server.script = [(200, "sad", 0.0)]  # a label without ratings: a prediction without VAD
    p = vlm.predict(clip(11))
    assert p.label == "sad" and p.vad is None and "vad" not in p.as_dict()


@pytest.mark.parametrize("text,vad", [
    ('{"emotion": "sad", "valence": -0.5, "arousal": -0.25, "dominance": -0.25}', [-0.5, -0.25, -0.25]),
    ('```json\n{"v": "0.5", "a": 0.0, "d": 1}\n```', [0.5, 0.0, 1.0]),
    ("Emotion: happy. Valence: 0.8, Arousal: 0.4, Dominance: 0.3", [0.8, 0.4, 0.3]),
    ('{"valence": 9, "arousal": 5, "dominance": 1}', [1.0, 0.0, -1.0]),  # 1-9 SAM ratings
    ('{"valence": 0.5, "arousal": 0.2}', None), ('{"valence": 12, "arousal": 0, "dominance": 0}', None),
    ('{"valence": true, "arousal": 0, "dominance": 0}', None), ("sad", None), ("", None)])
def test_vad_parsing(text, vad):
    got = parse_vad(text)
    assert (got is None and vad is None) or got.tolist() == pytest.approx(vad)


def test_streams_are_windowed_in_time_order_and_checked(server):
    vlm = RECOGNIZERS.create("vlm-openai", base_url=server.url, timeout=5)
    frames = np.random.default_rng(3).integers(0, 255, (10, 224, 224, 3), dtype=np.uint8)
    times = np.arange(10) * 0.25
    server.script = [(200, "happy", 0.0)] * 3
    out = vlm.predict_stream(StreamInput(frames, times))
    assert [t for t, _ in out] == pytest.approx([0.875, 1.125, 1.375]) and all(p.label == "happy" for _, p in out)
    assert len(server.requests) == 3
    assert len(vlm.predict_stream(StreamInput(frames, times), stride=2)) == 2
    for bad, field in (((frames[:7], times[:7]), "stream.frames"), ((frames, times[::-1]), "stream.times"),
                       ((frames.astype(np.float32), times), "stream.frames")):
        with pytest.raises(ValueError, match=field):
            StreamInput(*bad)


def test_clip_shape_is_checked():
    with pytest.raises(ValueError, match="clip.frames"):
        ClipInput(np.zeros((7, 224, 224, 3), np.uint8))
    with pytest.raises(ValueError, match="uint8"):
        ClipInput(np.zeros((8, 224, 224, 3), np.float32))

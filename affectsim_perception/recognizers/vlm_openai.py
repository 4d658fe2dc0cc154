"""``vlm-openai``: any OpenAI-compatible chat-completions endpoint with image input.

For example a vLLM server of Qwen2.5-VL (``vllm serve Qwen/Qwen2.5-VL-7B-Instruct``). The 8
frames go as JPEG data URLs in one user message with a prompt that lists the five labels and asks
for valence, arousal and dominance in [-1, 1], as JSON; temperature 0. Answers are parsed
robustly: the label from a JSON ``{"emotion": ...}``, an "Answer: X" line, or exactly one label or
synonym named, anything else an explicit ``unparseable`` outcome; the VAD from the JSON fields or
"valence: 0.4"-style lines (also v/a/d, pleasure for valence, and 1-9 SAM ratings, mapped to
[-1, 1]), and a prediction without all three in range carries no VAD (never a guessed one).
Every request has a timeout and is retried (connection errors, timeouts, HTTP 429 and 5xx) with
backoff; after the last retry the outcome is ``error``. Responses are cached by (endpoint, model,
prompt, frames) in memory and, with ``cache_dir``, on disk (one JSON file per key, written
atomically). Configuration: arguments or ``AFFECTSIM_VLM_URL``, ``AFFECTSIM_VLM_MODEL``,
``OPENAI_API_KEY``.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
from PIL import Image

from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import EMOTIONS
from affectsim_core.readers import read_json
from affectsim_perception.recognizers.base import RECOGNIZERS, ClipInput, Prediction, Recognizer

PROMPT = ("These 8 frames, in time order, show one person. Which emotion does their body language express? "
          "Choose exactly one of: angry, fearful, happy, neutral, sad. Also rate their valence (unpleasant -1 to "
          "pleasant 1), arousal (calm -1 to excited 1) and dominance (submissive -1 to in control 1). Answer "
          'with JSON only, e.g. {"emotion": "sad", "valence": -0.6, "arousal": -0.3, "dominance": -0.3}.')
MAX_TOKENS = 96  # the JSON answer is about 35 tokens
SYNONYMS = {
    "angry": ("angry", "anger", "furious", "mad", "irritated", "annoyed"),
    "fearful": ("fearful", "fear", "afraid", "scared", "frightened", "anxious", "terrified"),
    "happy": ("happy", "happiness", "joy", "joyful", "cheerful", "excited", "elated"),
    "neutral": ("neutral", "calm", "indifferent", "relaxed", "no emotion"),
    "sad": ("sad", "sadness", "unhappy", "sorrowful", "depressed", "dejected", "upset"),
}


def parse_label(text: str) -> str | None:
    """The emotion an answer names, or None when it names none or several."""
    t = text.strip().lower()
    try:  # {"emotion": "sad"} (possibly inside a code fence)
        obj = json.loads(re.sub(r"^```(json)?|```$", "", t).strip())
        if isinstance(obj, dict):
            for v in obj.values():
                if isinstance(v, str) and parse_label(v):
                    return parse_label(v)
    except (json.JSONDecodeError, TypeError):
        pass
    m = re.search(r"(answer|emotion|label)\s*[:=\-]\s*\**\s*([a-z ]+)", t)
    if m:
        found = _named(m.group(2).split(".")[0])
        if len(found) == 1:
            return found.pop()
    found = _named(t)
    return found.pop() if len(found) == 1 else None


VAD_KEYS = {"valence": ("valence", "pleasure", "v", "p"), "arousal": ("arousal", "activation", "a"),
            "dominance": ("dominance", "control", "d")}
_NUMBER = r"[-+]?\d+(?:\.\d+)?"


def parse_vad(text: str) -> np.ndarray | None:
    """Valence, arousal, dominance (3,) in [-1, 1] from an answer, or None unless all three are given.

    JSON fields or ``name: number`` lines; values on the 1-9 SAM scale (any above 1, all within
    [1, 9]) are mapped by (x - 5) / 4; values outside both scales give None."""
    t = text.strip().lower()
    found: dict[str, float] = {}
    try:
        obj = json.loads(re.sub(r"^```(json)?|```$", "", t).strip())
    except (json.JSONDecodeError, TypeError):
        obj = None
    if isinstance(obj, dict):
        for dim, names in VAD_KEYS.items():
            for k in names:
                v = obj.get(k)
                if isinstance(v, str) and re.fullmatch(_NUMBER, v.strip()):
                    v = float(v)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    found[dim] = float(v)
                    break
    else:
        for dim, names in VAD_KEYS.items():
            m = re.search(rf"\b({'|'.join(names[:2])})\b\W{{0,3}}\s*[:=]?\s*({_NUMBER})", t)
            if m:
                found[dim] = float(m.group(2))
    if set(found) != set(VAD_KEYS):
        return None
    v = np.array([found[d] for d in VAD_KEYS], float)
    if not np.isfinite(v).all():
        return None
    if (v > 1).any() and ((v >= 1) & (v <= 9)).all():
        v = (v - 5.0) / 4.0
    return v if np.abs(v).max() <= 1.0 else None


def _named(t: str) -> set[str]:
    t = re.sub(r"\bnot\s+(\w+)", " ", t)  # "not angry" does not name anger
    return {e for e, words in SYNONYMS.items() for w in words if re.search(rf"\b{re.escape(w)}\b", t)}


MAX_REPLY_BYTES = 1 * 2 ** 20  # one chat-completions reply (a label is a few hundred bytes)


@RECOGNIZERS.register("vlm-openai")
class OpenAIVLM(Recognizer):
    estimates_vad = True
    remote = True  # its answers come from a server: never cached (affectsim_eval.episode.passive_cache)

    def __init__(self, base_url: str | None = None, model: str | None = None, api_key: str | None = None,
                 timeout: float = 60.0, retries: int = 2, backoff: float = 1.0, cache_dir: str | Path | None = None,
                 prompt: str = PROMPT, jpeg_quality: int = 90) -> None:
        self.base_url = (base_url or os.environ.get("AFFECTSIM_VLM_URL", "http://127.0.0.1:8000/v1")).rstrip("/")
        if not self.base_url.startswith(("http://", "https://")):
            raise InvalidInput("base_url", self.base_url, "an http(s) URL of an OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1")
        self.model = model or os.environ.get("AFFECTSIM_VLM_MODEL", "Qwen/Qwen2.5-VL-7B-Instruct")
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY", "EMPTY")
        if not (timeout > 0 and retries >= 0):
            raise InvalidInput("timeout/retries", (timeout, retries), "timeout > 0 s and retries >= 0")
        self.timeout, self.retries, self.backoff = float(timeout), int(retries), float(backoff)
        self.prompt, self.jpeg_quality = prompt, int(jpeg_quality)
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self._cache: dict[str, str] = {}

    # ------------------------------------------------------------------ request
    def _body(self, clip: ClipInput) -> dict:
        images = []
        for f in clip.frames:
            buf = io.BytesIO()
            Image.fromarray(f).save(buf, format="JPEG", quality=self.jpeg_quality)
            images.append({"type": "image_url", "image_url": {
                "url": "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()}})
        return {"model": self.model, "temperature": 0, "max_tokens": MAX_TOKENS,
                "messages": [{"role": "user", "content": [{"type": "text", "text": self.prompt}, *images]}]}

    def _key(self, clip: ClipInput) -> str:
        return hashlib.sha256(f"{self.base_url}|{self.model}|{self.prompt}|{clip.digest()}".encode()).hexdigest()

    def _post(self, body: dict) -> str:
        req = urllib.request.Request(f"{self.base_url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {self.api_key}"})
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            raw = resp.read(MAX_REPLY_BYTES + 1)  # read no more than the limit, whatever the server sends
        if len(raw) > MAX_REPLY_BYTES:
            raise ValueError(f"reply of {self.base_url} is over {MAX_REPLY_BYTES} bytes; expected a short chat completion")
        try:
            data = json.loads(raw.decode())
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"reply of {self.base_url} is not JSON ({exc}): {raw[:200]!r}") from None
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise ValueError(f"response without choices[0].message.content: {str(data)[:200]}") from None
        if isinstance(content, list):  # some servers return content parts
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        return str(content)

    def _answer(self, clip: ClipInput) -> str:
        key = self._key(clip)
        if key in self._cache:
            return self._cache[key]
        path = self.cache_dir / f"{key}.json" if self.cache_dir else None
        if path is not None and path.is_file():
            cached = read_json(path, MAX_REPLY_BYTES, "vlm cache entry")
            if not (isinstance(cached, dict) and isinstance(cached.get("answer"), str)):
                raise InvalidInput("vlm cache entry", str(path), 'a JSON object {"answer": text} (delete the file)')
            self._cache[key] = cached["answer"]
            return self._cache[key]
        body, last = self._body(clip), None
        for attempt in range(self.retries + 1):
            try:
                answer = self._post(body)
                break
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code} from {self.base_url}"
                if exc.code != 429 and exc.code < 500:
                    raise RuntimeError(last) from None
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                last = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
            except ValueError as exc:
                raise RuntimeError(str(exc)) from None
            if attempt < self.retries:
                time.sleep(self.backoff * 2 ** attempt)
        else:
            raise RuntimeError(f"no answer after {self.retries + 1} attempts ({last})")
        self._cache[key] = answer
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"model": self.model, "answer": answer}))
            os.replace(tmp, path)
        return answer

    def predict(self, clip: ClipInput) -> Prediction:
        try:
            answer = self._answer(clip)
        except RuntimeError as exc:
            return Prediction.failed("error", str(exc))
        label = parse_label(answer)
        if label is None:
            return Prediction.failed("unparseable", answer[:200])
        p = np.zeros(len(EMOTIONS))
        p[EMOTIONS.index(label)] = 1.0
        return Prediction(p, label, "ok", answer[:200], parse_vad(answer))

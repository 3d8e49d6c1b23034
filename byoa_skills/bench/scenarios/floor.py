"""``floor``: what the model itself costs for each real clip, with nothing around it: raw
CTranslate2 on one thread, the encoder on the smallest of the engine's windows that holds the
clip, then a greedy decode of as many tokens as the clip's answer has (the answer: the
greedy decode of the whole 30 s window, so that a window too short to hear the clip cannot
make the floor lower or higher). No VAD, no features, no pool, no HTTP. The engine's p50 at
concurrency 1 over the floor, per clip-length group, is how close a lone call comes to the
machine's floor (the headline's ``floor`` figures)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from byoa_skills.bench.context import Context, Skip
from byoa_skills.bench.stats import summarize

NAME = "floor"
TITLE = "The machine's floor: raw CTranslate2, one thread"


def smallest_window(seconds: float, model: str) -> float:
    """The smallest window of the engine's ladder for ``model`` that holds ``seconds`` of
    audio (whatever the clip's language: the machine's floor, not the engine's choice)."""
    from byoa_skills.pool.config import DEFAULT_ENCODER_SECONDS, engine_decode_options

    ladder = engine_decode_options(DEFAULT_ENCODER_SECONDS, model).window_ladder()
    return next((w for w in ladder if w >= seconds), 30.0)


def run(ctx: Context) -> dict[str, Any]:
    """Per group: the floor's seconds (every clip ``repeats`` times a round), the windows
    and the tokens decoded."""
    if ctx.settings.device == "cuda":
        raise Skip("the floor is measured on the CPU")
    if not ctx.real:
        raise Skip("no real clips (tests/data/realspeech) to measure the floor on")
    import ctranslate2
    from faster_whisper.feature_extractor import FeatureExtractor
    from faster_whisper.tokenizer import Tokenizer
    from tokenizers import Tokenizer as HfTokenizer

    model = ctranslate2.models.Whisper(
        str(ctx.model_dir), device="cpu", compute_type="int8", intra_threads=1
    )
    extractor = FeatureExtractor(feature_size=model.n_mels)
    hf = HfTokenizer.from_file(str(ctx.model_dir / "tokenizer.json"))
    settings = ctx.settings
    ctx.reporter.start(NAME, settings.rounds * len(ctx.real))

    def window_of(features: np.ndarray, window: float) -> Any:
        frames = round(window * extractor.nb_max_frames / 30.0)
        padded = np.zeros((features.shape[0], frames), dtype=np.float32)
        used = min(frames, features.shape[-1])
        padded[:, :used] = features[:, :used]
        return ctranslate2.StorageView.from_array(np.ascontiguousarray(padded[None]))

    def once(view: Any, prompt: list[int], tokens: int, end: int) -> float:
        began = time.perf_counter()
        encoded = model.encode(view, to_cpu=False)
        # the end token suppressed: exactly ``tokens`` steps, however the window heard it
        model.generate(
            encoded,
            [prompt],
            beam_size=1,
            max_length=len(prompt) + tokens,
            suppress_blank=True,
            suppress_tokens=[-1, end],
        )
        return time.perf_counter() - began

    prepared = []
    tokens: dict[str, int] = {}
    for name, clips in ctx.real.items():
        for clip in clips:
            window = smallest_window(clip.seconds, ctx.settings.model)
            features = extractor(clip.samples.astype(np.float32) / 32768)
            tokenizer = Tokenizer(hf, model.is_multilingual, "transcribe", clip.language)
            prompt = [*tokenizer.sot_sequence, tokenizer.no_timestamps]
            whole = model.generate(
                model.encode(window_of(features, 30.0)),
                [prompt],
                beam_size=1,
                max_length=len(prompt) + 224,
            )
            tokens[clip.key] = max(1, len(whole[0].sequences_ids[0]))
            prepared.append((name, clip, window, window_of(features, window), prompt))
    end = tokenizer.eot

    for _, clip, _, view, prompt in prepared[:2]:
        once(view, prompt, tokens[clip.key], end)  # warm
    samples: dict[str, list[list[float]]] = {name: [] for name in ctx.real}
    for _ in range(settings.rounds):
        for name in ctx.real:
            ctx.reporter.step(f"floor, {name}")
            times = []
            for group, clip, _, view, prompt in prepared:
                if group != name:
                    continue
                times += [
                    once(view, prompt, tokens[clip.key], end) for _ in range(settings.repeats)
                ]
            samples[name].append(times)
            ctx.reporter.advance()
    groups = {}
    for name in ctx.real:
        flat = [x for g in samples[name] for x in g]
        groups[name] = {
            "floor_s": summarize(flat, samples[name]).to_dict(),
            "windows_s": sorted({w for g, _, w, _, _ in prepared if g == name}),
            "tokens": [tokens[c.key] for c in ctx.real[name]],
        }
    ctx.shared["floor"] = {name: figures["floor_s"]["p50"] for name, figures in groups.items()}
    return {"threads": 1, "groups": groups}

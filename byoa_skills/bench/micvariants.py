"""A clip as a browser microphone hands it over: silence before the speech (0.1-0.9 s) and
after it (up to 2.5 s), spoken quietly (-20 dB) or loudly (at full scale, the loudest few
samples clipped), a little noise, a round trip through 48 kHz. Each clip gets the same fixed
variants every time: the random parts are drawn from a generator seeded with the variant's
name and the clip's own name, and the resampling is a fixed filter in numpy."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

SAMPLE_RATE = 16000
#: The longest variant, in seconds (the engine's longest clip).
MAX_SECONDS = 15.0
#: The up/down factor of the round trip: 16 kHz to 48 kHz and back.
ROUND_TRIP_FACTOR = 3
#: Taps of the round trip's low-pass filter (odd, so it delays by a whole number of samples).
FILTER_TAPS = 241


@dataclass(frozen=True)
class Recipe:
    """How one variant is made. Seconds are ranges a seeded draw picks from; ``gain_db`` is
    the level against the clip as recorded (None: raised to just past full scale, so the
    loudest few samples clip); ``noise_db`` is the level of white noise over the whole
    variant, silences included, against full scale (None: no noise)."""

    name: str
    lead_s: tuple[float, float]
    trail_s: tuple[float, float]
    gain_db: float | None = 0.0
    noise_db: float | None = None
    round_trip: bool = False


#: The variants of every clip, in order.
RECIPES: tuple[Recipe, ...] = (
    Recipe("lead-short", (0.1, 0.3), (0.0, 0.1)),
    Recipe("lead-long", (0.6, 0.9), (0.1, 0.3)),
    Recipe("trail-long", (0.1, 0.4), (2.0, 2.5)),
    Recipe("quiet", (0.2, 0.6), (0.3, 1.0), gain_db=-20.0),
    Recipe("loud", (0.2, 0.6), (0.5, 1.5), gain_db=None),
    Recipe("noise", (0.2, 0.6), (0.5, 1.5), noise_db=-50.0),
    Recipe("noise-more", (0.3, 0.8), (1.0, 2.0), noise_db=-40.0),
    Recipe("48k", (0.1, 0.5), (0.2, 1.0), round_trip=True),
    Recipe("48k-trail", (0.3, 0.9), (1.5, 2.5), round_trip=True),
    Recipe(
        "quiet-noise-48k", (0.3, 0.9), (0.5, 2.5), gain_db=-20.0, noise_db=-60.0, round_trip=True
    ),
    Recipe("loud-noise-48k", (0.1, 0.9), (0.5, 2.5), gain_db=None, noise_db=-45.0, round_trip=True),
    Recipe("mic", (0.1, 0.9), (0.0, 2.5), gain_db=-6.0, noise_db=-55.0, round_trip=True),
)


@dataclass(frozen=True)
class Variant:
    """One variant of a clip: its recipe's name, the 16 kHz mono int16 samples, and the
    silence added before and after the clip, in seconds."""

    name: str
    samples: np.ndarray
    lead_s: float
    trail_s: float

    @property
    def seconds(self) -> float:
        """Its length in seconds."""
        return len(self.samples) / SAMPLE_RATE


def _seed(clip_name: str, recipe: str) -> int:
    """A fixed seed for one recipe of one clip (CRC-32 of both names: the same on every
    machine and Python, unlike ``hash``)."""
    return zlib.crc32(f"{clip_name}\0{recipe}".encode())


def _low_pass() -> np.ndarray:
    """The round trip's filter at 48 kHz: a Blackman-windowed sinc cut at 7.6 kHz (just under
    the 8 kHz that 16 kHz holds), unit gain at 0 Hz."""
    n = np.arange(FILTER_TAPS) - (FILTER_TAPS - 1) / 2
    cutoff = 7600.0 / (SAMPLE_RATE * ROUND_TRIP_FACTOR)  # cycles per 48 kHz sample
    taps = 2 * cutoff * np.sinc(2 * cutoff * n) * np.blackman(FILTER_TAPS)
    return taps / taps.sum()


def round_trip_48k(samples: np.ndarray) -> np.ndarray:
    """``samples`` (16 kHz, float) resampled to 48 kHz and back, as a browser that records at
    48 kHz and a page that hands over 16 kHz would: zeros stuffed between the samples and
    low-passed (x3 gain), then low-passed again and every third sample kept. Same length,
    no delay; only numpy."""
    factor, taps = ROUND_TRIP_FACTOR, _low_pass()
    up = np.zeros(len(samples) * factor)
    up[::factor] = samples * factor
    half = (FILTER_TAPS - 1) // 2
    up = np.convolve(up, taps)[half : half + len(up)]
    down = np.convolve(up, taps)[half : half + len(up)]
    return down[::factor]


def make_variant(samples: np.ndarray, clip_name: str, recipe: Recipe) -> Variant:
    """One variant of a clip (16 kHz mono int16 ``samples``) by ``recipe``, the same for the
    same clip name every time. The result is 16 kHz mono int16, at most :data:`MAX_SECONDS`
    long (the trailing silence is shortened to fit)."""
    if samples.dtype != np.int16 or samples.ndim != 1:
        raise ValueError("want 16 kHz mono int16 samples")
    rng = np.random.default_rng(_seed(clip_name, recipe.name))
    lead = float(rng.uniform(*recipe.lead_s))
    trail = float(rng.uniform(*recipe.trail_s))
    lead_n = round(lead * SAMPLE_RATE)
    room = int(MAX_SECONDS * SAMPLE_RATE) - lead_n - len(samples)
    trail_n = max(0, min(round(trail * SAMPLE_RATE), room))
    speech = samples.astype(np.float64) / 32768.0
    if recipe.gain_db is None:
        peak = float(np.abs(speech).max()) or 1.0
        speech = speech * (1.05 / peak)  # just past full scale: the loudest samples clip
    else:
        speech = speech * 10 ** (recipe.gain_db / 20)
    audio = np.concatenate([np.zeros(lead_n), speech, np.zeros(trail_n)])
    if recipe.noise_db is not None:
        audio = audio + rng.standard_normal(len(audio)) * 10 ** (recipe.noise_db / 20)
    if recipe.round_trip:
        audio = round_trip_48k(audio)
    audio = np.clip(np.round(audio * 32768.0), -32768, 32767).astype(np.int16)
    room_s = len(audio) / SAMPLE_RATE
    if room_s > MAX_SECONDS + 1e-9:
        raise ValueError(f"{clip_name}: a {room_s:.2f} s clip leaves no room for its variants")
    return Variant(recipe.name, audio, lead_n / SAMPLE_RATE, trail_n / SAMPLE_RATE)


def mic_variants(
    samples: np.ndarray, clip_name: str, recipes: tuple[Recipe, ...] = RECIPES
) -> list[Variant]:
    """The variants of one clip, one per recipe in order (see :func:`make_variant`)."""
    return [make_variant(samples, clip_name, recipe) for recipe in recipes]

"""The small interface every speech backend implements, and the answer it gives."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from byoa_skills.runtimes.speech.errors import RuntimeRefusal
from byoa_skills.runtimes.speech.options import DecodeRequest

#: The sample rate every backend takes, in samples per second.
SAMPLE_RATE = 16000
#: The phases of a call a backend times (:attr:`Transcript.phases`): the log-Mel features
#: (and the VAD, when on), the encoder passes, the language detection, the decodes.
PHASES = ("features", "encode", "detect", "decode")


@dataclass(frozen=True)
class Word:
    """One word and when it was said, in seconds from the clip's start."""

    start: float
    end: float
    word: str
    probability: float


@dataclass(frozen=True)
class Segment:
    """One stretch of text between two timestamp tokens, in seconds from the clip's start,
    with the decoder's figures for it (as faster-whisper reports them)."""

    start: float
    end: float
    text: str
    tokens: tuple[int, ...] = ()
    avg_logprob: float = 0.0
    compression_ratio: float = 0.0
    no_speech_prob: float = 0.0
    #: The words of the segment, when word timestamps were asked for.
    words: tuple[Word, ...] = ()


@dataclass(frozen=True)
class Transcript:
    """What a backend heard in one clip.

    ``text`` is stripped and is ``""`` when nothing was said. ``language`` is the code the text
    was decoded in: the one asked for, or the one detected; ``None`` only when no language was
    asked for and the clip holds no speech to detect one from. ``language_probability`` is 1.0
    for a language asked for, the model's probability for a detected one, 0.0 when ``language``
    is ``None``. ``seconds`` is the wall time the call took. ``segments`` is empty unless the
    call asked for timestamps (:class:`DecodeRequest`). ``window_seconds`` is the encoder
    window that gave the answer (30: Whisper's whole window; less: the short window, see
    :attr:`DecodeOptions.encoder_seconds`). ``tokens``, ``budget_hit`` and ``avg_logprob`` say
    how the decode went, when the backend knows (for the short window's guard);
    ``beam_size`` the beams of the decode that gave it (1: greedy; 0: none ran), and
    ``attempts`` how many decodes it took (more than 1: the guard decoded it again).
    """

    text: str
    language: str | None
    language_probability: float
    seconds: float
    segments: tuple[Segment, ...] = ()
    window_seconds: float = 30.0
    tokens: int = 0
    budget_hit: bool = False
    avg_logprob: float | None = None
    beam_size: int = 0
    attempts: int = 1
    #: The threads the encoder ran on for the answer (0: not known).
    encoder_threads: int = 0
    #: The seconds of speech the model was given (after the VAD cut the rest; 0: not known).
    speech_seconds: float = 0.0
    #: The engine and precision that ran the encoder: ``ctranslate2-int8``,
    #: ``openvino-bf16``, ``openvino-f32``… ("": not known).
    encoder: str = ""
    #: Seconds spent in each of :data:`PHASES` by the batch that gave this answer (every
    #: clip decoded with it shares them; empty: not timed).
    phases: tuple[tuple[str, float], ...] = ()


class SpeechBackend(ABC):
    """A speech-to-text model: load it once, then transcribe any number of clips with it.

    Answers are deterministic: the same samples and language give the same text.
    """

    @abstractmethod
    def load(self) -> None:
        """Load the model into memory. Calling it again does nothing."""

    @property
    @abstractmethod
    def languages(self) -> frozenset[str]:
        """The language codes the loaded model can transcribe."""

    def transcribe(self, samples: np.ndarray, language: str | None = None) -> Transcript:
        """The text spoken in ``samples`` (1-D float32, 16 kHz, scaled to [-1, 1]).

        ``language`` is the code of the language spoken, or ``None`` to detect it. Raises
        :class:`RuntimeRefusal` with code ``bad-samples`` or ``unsupported-language`` before
        running the model when the call cannot be answered. It is a batch of one: the text is
        the one :meth:`transcribe_batch` gives the clip in any batch.
        """
        (answer,) = self.transcribe_batch([(samples, language)])
        if isinstance(answer, RuntimeRefusal):
            raise answer
        return answer

    @abstractmethod
    def transcribe_batch(
        self, items: Sequence[tuple[np.ndarray, str | None]], *, wide: bool = False
    ) -> list[Transcript | RuntimeRefusal]:
        """Each ``(samples, language)`` clip's answer, in order, decoded together; a clip
        that cannot be answered gets its :class:`RuntimeRefusal` in its place and costs the
        others nothing. ``wide`` says the machine's other cores are idle: a backend that can
        encode on more threads may (the answers are the same either way, up to the
        arithmetic's order); one that cannot ignores it."""

    def transcribe_detailed(
        self, samples: np.ndarray, language: str | None, request: DecodeRequest
    ) -> Transcript:
        """The text of one clip decoded as ``request`` asks: translated to English, after a
        prompt, with segment or word timestamps. A plain request gives what
        :meth:`transcribe` gives. Raises :class:`RuntimeRefusal` like :meth:`transcribe`, and
        ``unsupported-option`` for a request this backend cannot decode (the default)."""
        if request.plain:
            return self.transcribe(samples, language)
        raise RuntimeRefusal(
            "unsupported-option", f"{type(self).__name__} decodes text only, without {request}"
        )


def check_call(
    samples: object, language: str | None, languages: frozenset[str], model_name: str
) -> None:
    """Refuse a clip before any model runs: ``bad-samples`` (see :func:`check_samples`), or
    ``unsupported-language`` for a language not in ``languages``."""
    check_samples(samples)
    if language is not None and language not in languages:
        raise RuntimeRefusal(
            "unsupported-language",
            f"the model {model_name} cannot transcribe language {language!r}",
        )


def check_samples(samples: object) -> np.ndarray:
    """``samples`` itself when it is a 1-D float32 numpy array of finite values.

    Raises :class:`RuntimeRefusal` with code ``bad-samples`` otherwise. An empty array passes:
    it is a clip with nothing said.
    """
    if not isinstance(samples, np.ndarray):
        raise RuntimeRefusal("bad-samples", f"expected a numpy array, got {type(samples).__name__}")
    if samples.dtype != np.float32:
        raise RuntimeRefusal("bad-samples", f"expected float32 samples, got {samples.dtype}")
    if samples.ndim != 1:
        raise RuntimeRefusal("bad-samples", f"expected a 1-D array, got {samples.ndim} dimensions")
    if not np.isfinite(samples).all():
        raise RuntimeRefusal("bad-samples", "the samples include NaN or infinite values")
    return samples

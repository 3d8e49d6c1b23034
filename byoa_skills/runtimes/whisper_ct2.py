"""A speech backend on faster-whisper's ``WhisperModel`` (CTranslate2), on the CPU or CUDA.

faster-whisper is imported by :meth:`WhisperCT2Backend.load`, not when this module is.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .base import SpeechBackend, Transcript, check_samples
from .errors import RuntimeRefusal
from .options import DecodeOptions

if TYPE_CHECKING:
    from faster_whisper import WhisperModel

#: The devices a backend runs on.
DEVICES = ("cpu", "cuda")
#: The compute type ``"default"`` stands for on each device.
DEFAULT_COMPUTE_TYPES = {"cpu": "int8", "cuda": "float16"}


class WhisperCT2Backend(SpeechBackend):
    """Whisper in CTranslate2 format (a folder with ``model.bin``, ``config.json``,
    ``tokenizer.json``, ``vocabulary.txt``), decoded with :class:`DecodeOptions`.

    Each clip's first 30 s window is encoded once and used both to detect the language (when
    none is given) and to decode, so detection costs no second encoder pass. Nothing is ever
    downloaded.
    """

    def __init__(
        self,
        model_dir: str | os.PathLike[str],
        *,
        device: str = "cpu",
        compute_type: str = "default",
        cpu_threads: int = 0,
        num_workers: int = 1,
        options: DecodeOptions | None = None,
        name: str | None = None,
    ) -> None:
        """Set the backend up; nothing is loaded until :meth:`load`.

        ``compute_type`` ``"default"`` is int8 on the CPU and float16 on CUDA. ``cpu_threads``
        0 lets CTranslate2 choose; ``num_workers`` is how many calls from different threads
        may run the model at once. ``name`` names the model in messages (default: the
        folder's name).
        """
        if device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
        if cpu_threads < 0 or num_workers < 1:
            raise ValueError("cpu_threads must be >= 0 and num_workers >= 1")
        self.model_dir = Path(model_dir)
        self.name = name if name is not None else self.model_dir.name
        self.device = device
        self.compute_type = (
            DEFAULT_COMPUTE_TYPES[device] if compute_type == "default" else compute_type
        )
        self.cpu_threads = cpu_threads
        self.num_workers = num_workers
        self.options = options if options is not None else DecodeOptions()
        self._model: WhisperModel | None = None
        self._languages: frozenset[str] = frozenset()
        self._suppress_tokens: tuple[int, ...] = ()
        self._vad_options: Any = None

    def load(self) -> None:
        """Load the model (and the VAD model when the options use it). Idempotent.

        Raises ``FileNotFoundError`` when the folder has no ``model.bin``, and CTranslate2's
        ``RuntimeError``/``ValueError`` when the model, device or compute type is unusable.
        """
        if self._model is not None:
            return
        if not (self.model_dir / "model.bin").is_file():
            raise FileNotFoundError(f"no model.bin in {self.model_dir}")
        from faster_whisper import WhisperModel
        from faster_whisper.tokenizer import Tokenizer
        from faster_whisper.transcribe import get_suppressed_tokens

        model = WhisperModel(
            str(self.model_dir),
            device=self.device,
            compute_type=self.compute_type,
            cpu_threads=self.cpu_threads,
            num_workers=self.num_workers,
            local_files_only=True,
        )
        if model.model.is_multilingual:
            # Only the codes whose language token this model's vocabulary has.
            token_id = model.hf_tokenizer.token_to_id
            languages = [c for c in model.supported_languages if token_id(f"<|{c}|>") is not None]
        else:
            languages = ["en"]
        english = Tokenizer(model.hf_tokenizer, model.model.is_multilingual, "transcribe", "en")
        self._suppress_tokens = tuple(get_suppressed_tokens(english, [-1]))
        if self.options.vad_filter:
            from faster_whisper.vad import VadOptions, get_vad_model

            get_vad_model()  # loads the Silero model shipped inside faster-whisper, once
            self._vad_options = VadOptions(
                threshold=self.options.vad_threshold,
                min_silence_duration_ms=self.options.vad_min_silence_ms,
                speech_pad_ms=self.options.vad_speech_pad_ms,
            )
        self._languages = frozenset(languages)
        self._model = model

    @property
    def loaded(self) -> bool:
        """Whether :meth:`load` has succeeded."""
        return self._model is not None

    @property
    def languages(self) -> frozenset[str]:
        """The language codes the loaded model can transcribe (only ``en`` for ``*.en``)."""
        return self._languages

    @property
    def multilingual(self) -> bool:
        """Whether the loaded model detects and transcribes languages other than English."""
        return self._require_model().model.is_multilingual

    def transcribe(self, samples: np.ndarray, language: str | None = None) -> Transcript:
        """The text spoken in ``samples``; see :meth:`SpeechBackend.transcribe`.

        A clip in which the VAD finds no speech is answered ``""`` without running Whisper.
        """
        began = time.perf_counter()
        model = self._require_model()
        check_samples(samples)
        if language is not None and language not in self._languages:
            raise RuntimeRefusal(
                "unsupported-language",
                f"the model {self.name} cannot transcribe language {language!r}",
            )
        audio = self._speech_only(samples) if self.options.vad_filter else samples
        if audio.size == 0:
            return _transcript("", language, 1.0 if language else 0.0, began)

        from faster_whisper.audio import pad_or_trim
        from faster_whisper.tokenizer import Tokenizer

        features = model.feature_extractor(audio)
        content_frames = features.shape[-1] - 1
        window = min(model.feature_extractor.nb_max_frames, content_frames)
        # Exactly the first window generate_segments would encode, so it can reuse it.
        encoder_output = model.encode(pad_or_trim(features[:, :window]))
        if language is not None:
            probability = 1.0
        elif not model.model.is_multilingual:
            language, probability = "en", 1.0
        else:
            token, probability = model.model.detect_language(encoder_output)[0][0]
            language = token[2:-2]
        tokenizer = Tokenizer(
            model.hf_tokenizer, model.model.is_multilingual, task="transcribe", language=language
        )
        segments = model.generate_segments(
            features, tokenizer, self._transcription_options(), False, encoder_output
        )
        text = "".join(segment.text for segment in segments).strip()
        return _transcript(text, language, float(probability), began)

    def _require_model(self) -> WhisperModel:
        if self._model is None:
            raise RuntimeError("the backend is not loaded: call load() first")
        return self._model

    def _speech_only(self, samples: np.ndarray) -> np.ndarray:
        from faster_whisper.vad import get_speech_timestamps

        if samples.size == 0:
            return samples
        chunks = get_speech_timestamps(samples, self._vad_options)
        if not chunks:
            return samples[:0]
        return np.concatenate([samples[chunk["start"] : chunk["end"]] for chunk in chunks])

    def _transcription_options(self) -> Any:
        from faster_whisper.transcribe import TranscriptionOptions

        o = self.options
        # A new object per call: generate_segments rewrites some of its fields.
        return TranscriptionOptions(
            beam_size=o.beam_size,
            best_of=1,
            patience=o.patience,
            length_penalty=1.0,
            repetition_penalty=1.0,
            no_repeat_ngram_size=0,
            log_prob_threshold=o.log_prob_threshold,
            no_speech_threshold=o.no_speech_threshold,
            compression_ratio_threshold=None,
            condition_on_previous_text=o.condition_on_previous_text,
            prompt_reset_on_temperature=0.5,
            temperatures=[DecodeOptions.TEMPERATURE],
            initial_prompt=None,
            prefix=None,
            suppress_blank=True,
            suppress_tokens=list(self._suppress_tokens),
            without_timestamps=o.without_timestamps,
            max_initial_timestamp=1.0,
            word_timestamps=False,
            prepend_punctuations="",  # both only matter with word timestamps
            append_punctuations="",
            multilingual=False,
            max_new_tokens=o.max_new_tokens,
            clip_timestamps="0",
            hallucination_silence_threshold=None,
            hotwords=None,
        )


def _transcript(text: str, language: str | None, probability: float, began: float) -> Transcript:
    return Transcript(
        text=text,
        language=language,
        language_probability=probability,
        seconds=time.perf_counter() - began,
    )

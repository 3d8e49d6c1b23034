"""A speech backend on faster-whisper's ``WhisperModel`` (CTranslate2), on the CPU or CUDA.

faster-whisper is imported by :meth:`WhisperCT2Backend.load`, not when this module is.
"""

from __future__ import annotations

import logging
import os
import time
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from byoa_skills.runtimes.speech.base import (
    PHASES,
    SAMPLE_RATE,
    Segment,
    SpeechBackend,
    Transcript,
    Word,
    check_call,
)
from byoa_skills.runtimes.speech.encoder_choice import EncoderChoice, choose_encoder
from byoa_skills.runtimes.speech.errors import RuntimeRefusal
from byoa_skills.runtimes.speech.options import DecodeOptions, DecodeRequest
from byoa_skills.runtimes.speech.phrases import normalized_words, says_a_phrase_twice
from byoa_skills.runtimes.speech.vad import load_vad, speech_only

if TYPE_CHECKING:
    from faster_whisper import WhisperModel

log = logging.getLogger("byoa_skills.runtimes")

#: The devices a backend runs on.
DEVICES = ("cpu", "cuda")
#: The compute type ``"default"`` stands for on each device.
DEFAULT_COMPUTE_TYPES = {"cpu": "int8", "cuda": "float16"}
#: Whisper's decoder context, in tokens: a prompt and the tokens decoded share it.
CONTEXT_TOKENS = 448


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
        wide_threads: int = 0,
        encoder_backend: str = "auto",
    ) -> None:
        """Set the backend up; nothing is loaded until :meth:`load`.

        ``compute_type`` ``"default"`` is int8 on the CPU and float16 on CUDA. ``cpu_threads``
        0 lets CTranslate2 choose; ``num_workers`` is how many calls from different threads
        may run the model at once. ``name`` names the model in messages (default: the
        folder's name). ``wide_threads`` above ``cpu_threads`` (on the CPU) loads a second
        copy of the model on that many threads, used only to encode when a call asks for it
        (``transcribe_batch(..., wide=True)``): the encoder scales with threads, the decoder
        does not. ``encoder_backend`` (``auto``, ``ctranslate2``, ``openvino``) says which
        engine runs the encoder (:func:`choose_encoder`, resolved here, built and compiled by
        :meth:`load`); the decoder is always CTranslate2's. A request for timestamps runs
        faster-whisper's own ``transcribe`` on the same encoder. With an OpenVINO encoder
        CTranslate2's model is loaded without its encoder's weights (:mod:`decoder_only`).
        """
        if device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
        if cpu_threads < 0 or num_workers < 1 or wide_threads < 0:
            raise ValueError("cpu_threads, wide_threads must be >= 0 and num_workers >= 1")
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
        self.wide_threads = wide_threads if device == "cpu" and wide_threads > cpu_threads else 0
        self._wide: Any = None
        self.encoder_backend = encoder_backend
        self._encoder = choose_encoder(
            encoder_backend, device=device, compute_type=self.compute_type
        )
        self._openvino: dict[bool, Any] = {}
        self._decoder_only = False

    def load(self) -> None:
        """Load the model (and the VAD model when the options use it). Idempotent.

        Raises ``FileNotFoundError`` when the folder has no ``model.bin``, and CTranslate2's
        ``RuntimeError``/``ValueError`` when the model, device or compute type is unusable.
        """
        if self._model is not None:
            return
        if not (self.model_dir / "model.bin").is_file():
            raise FileNotFoundError(f"no model.bin in {self.model_dir}")
        from faster_whisper.tokenizer import Tokenizer
        from faster_whisper.transcribe import get_suppressed_tokens

        if self._encoder.openvino:
            # The decoder first: loading it takes about 100 MiB more than it keeps, which
            # would otherwise come on top of the compiled encoder's memory.
            model = self._load_decoder()
            self._openvino = self._load_openvino()
            if not self._openvino:  # CTranslate2's own encoder runs: it needs its weights
                del model
                model = self._load_whisper(self.model_dir)
                self._decoder_only = False
        else:
            model = self._load_whisper(self.model_dir)
        if model.model.is_multilingual:
            # Only the codes whose language token this model's vocabulary has.
            token_id = model.hf_tokenizer.token_to_id
            languages = [c for c in model.supported_languages if token_id(f"<|{c}|>") is not None]
        else:
            languages = ["en"]
        english = Tokenizer(model.hf_tokenizer, model.model.is_multilingual, "transcribe", "en")
        self._suppress_tokens = tuple(get_suppressed_tokens(english, [-1]))
        if self.options.vad_filter:
            self._vad_options = load_vad(self.options, on_openvino=bool(self._openvino))
        if not self._openvino and self.wide_threads:
            import ctranslate2

            self._wide = ctranslate2.models.Whisper(
                str(self.model_dir),
                device=self.device,
                compute_type=self.compute_type,
                intra_threads=self.wide_threads,
            )
        self._languages = frozenset(languages)
        self._model = model

    def _load_whisper(self, folder: Path) -> WhisperModel:
        from faster_whisper import WhisperModel

        return WhisperModel(
            str(folder),
            device=self.device,
            compute_type=self.compute_type,
            cpu_threads=self.cpu_threads,
            num_workers=self.num_workers,
            local_files_only=True,
        )

    def _load_decoder(self) -> WhisperModel:
        """CTranslate2's model without the encoder's weights (:mod:`decoder_only`), whose
        encoder passes, faster-whisper's own ``transcribe`` included, run on OpenVINO; the
        whole model where that one cannot be had."""
        from byoa_skills.runtimes.speech.decoder_only import decoder_only_folder

        try:
            model = self._load_whisper(decoder_only_folder(self.model_dir))
            self._decoder_only = True
        except (OSError, RuntimeError, ValueError) as error:
            log.warning("event=decoder-only-unavailable reason=%r", _one_line(error))
            model = self._load_whisper(self.model_dir)
        model.encode = self._encode_features  # type: ignore[method-assign]
        return model

    def _encode_features(self, features: np.ndarray) -> Any:
        """faster-whisper's ``WhisperModel.encode``, on the OpenVINO encoder."""
        import ctranslate2

        batch = features[None] if features.ndim == 2 else features
        return ctranslate2.StorageView.from_array(self._openvino[False].encode(batch))

    def _load_openvino(self) -> dict[bool, Any]:
        """The OpenVINO encoder compiled on ``cpu_threads`` (key False) and, with
        ``wide_threads``, on those (key True), from the verified cache. A cache that does not
        load is rebuilt once. Where the int8 model cannot be had or does not load, the float
        graph runs at the CPU's float precision; where the float graph fails too,
        CTranslate2's own encoder runs (an empty dict). :attr:`encoder` says what runs and
        why: a derived file never stops the engine."""
        from byoa_skills.runtimes.speech.openvino_cache import cached_encoder_model

        choice = self._encoder
        if choice.precision == "int8":
            compiled, why_not = self._try_openvino(self._int8_model, choice.inference)
            if compiled:
                return compiled
            why = f"the int8 encoder did not load: {why_not}"
            log.error("event=int8-encoder-fallback reason=%r", why)
            self._encoder = EncoderChoice("openvino", choice.inference, why, choice.inference)
        compiled, why_not = self._try_openvino(
            cached_encoder_model, self._encoder.inference or "f32"
        )
        if compiled:
            return compiled
        why = f"the OpenVINO encoder did not load: {why_not}"
        log.error("event=openvino-encoder-fallback reason=%r", why)
        self._encoder = EncoderChoice("ctranslate2", self.compute_type, why)
        return {}

    def _int8_model(self, model_dir: Path, rebuild: bool = False) -> Any:
        from byoa_skills.runtimes.speech.openvino_int8 import cached_int8_model

        return cached_int8_model(model_dir, rebuild=rebuild)

    def _try_openvino(self, cached: Any, inference: str) -> tuple[dict[bool, Any], str]:
        """The encoder from ``cached(model_dir, rebuild=...)`` compiled, rebuilt once when it
        does not load, and ``""``; an empty dict and why when it cannot be had."""
        from byoa_skills.runtimes.speech.openvino_int8 import Int8Unavailable

        why_not = ""
        for rebuild in (False, True):
            try:
                model = cached(self.model_dir, rebuild=rebuild)
                return self._compile_openvino(model, inference), ""
            except Int8Unavailable as error:
                why_not = _one_line(error)
                log.warning("event=int8-encoder-unavailable reason=%r", why_not)
                return {}, why_not
            except Exception as error:  # OpenVINO's own errors: a damaged or foreign graph
                why_not = _one_line(error)
                log.warning("event=openvino-encoder-rebuild reason=%r", why_not)
        return {}, why_not

    def _compile_openvino(self, model: Any, inference: str) -> dict[bool, Any]:
        from byoa_skills.runtimes.speech.openvino_encoder import OpenVINOEncoder

        source = model.source
        compiled = {False: OpenVINOEncoder(source, precision=inference, threads=self.cpu_threads)}
        if self.wide_threads:
            compiled[True] = OpenVINOEncoder(source, precision=inference, threads=self.wide_threads)
        return compiled

    @property
    def encoder(self) -> EncoderChoice:
        """The engine and precision that run the encoder (``encoder.label`` names it)."""
        return self._encoder

    @property
    def decoder_only(self) -> bool:
        """Whether CTranslate2's model was loaded without its encoder's weights (the encoder
        runs on OpenVINO)."""
        return self._decoder_only

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

    def transcribe_batch(
        self, items: Sequence[tuple[np.ndarray, str | None]], *, wide: bool = False
    ) -> list[Transcript | RuntimeRefusal]:
        """Each clip's text, from batched encoder passes and batched decodes.

        ``items`` are ``(samples, language)`` pairs as :meth:`transcribe` takes them; their
        languages may differ. An item that cannot be answered gets its
        :class:`RuntimeRefusal` in its place and costs the others nothing. Each clip is
        encoded in the window :meth:`DecodeOptions.first_window` gives its speech (the whole
        30 s window unless the options ask for shorter ones), the clips of one window
        together, and decoded with :meth:`DecodeOptions.beams_for` beams; the guard
        (:func:`guard_step`) sends an answer that looks degenerate up a window, and a weak
        greedy one to the beam. The language of a clip that names none is detected from its
        encoder output. ``wide`` encodes on :attr:`wide_threads` threads (when the backend
        has them: a lone call on an otherwise idle machine); the decode always runs on
        ``cpu_threads``. The answers are those :meth:`transcribe` gives for each clip alone.
        """
        began = time.perf_counter()
        model = self._require_model()
        clock = PhaseClock()
        answers: list[Transcript | RuntimeRefusal | None] = [None] * len(items)
        pending: list[_Clip] = []
        for index, (samples, language) in enumerate(items):
            try:
                check_call(samples, language, self._languages, self.name)
            except RuntimeRefusal as refusal:
                answers[index] = refusal
                continue
            with clock.phase("features"):
                vad = self.options.vad_filter
                audio = speech_only(samples, self._vad_options) if vad else samples
                features = model.feature_extractor(audio) if audio.size else None
            if features is None:
                answers[index] = _transcript("", language, 1.0 if language else 0.0, began)
                continue
            window = min(model.feature_extractor.nb_max_frames, features.shape[-1] - 1)
            seconds = audio.size / SAMPLE_RATE
            pending.append(
                _Clip(
                    index,
                    features[:, :window],
                    language,
                    seconds,
                    self.options.first_window(seconds, language),
                    self.options.beams_for(seconds, language),
                )
            )
        while pending:
            again: list[_Clip] = []
            for group in _groups(pending):
                again += self._decode_group(model, group, began, wide, clock)
            for clip in pending:
                if clip.answer is not None:
                    answers[clip.index] = clip.answer
            pending = again
        phases, ended = clock.said(), time.perf_counter() - began
        return [
            replace(answer, phases=phases, seconds=ended)
            if isinstance(answer, Transcript)
            else answer
            for answer in answers
            if answer is not None
        ]

    def _decode_group(
        self, model: WhisperModel, group: list[_Clip], began: float, wide: bool, clock: PhaseClock
    ) -> list[_Clip]:
        """Encode the clips of one window together, decode them, and keep each answer the
        guard accepts (``clip.answer``); the clips to decode again, on their next step."""
        from faster_whisper.audio import pad_or_trim

        frames = self._frames(group[0].window)
        batch = np.stack([pad_or_trim(clip.features, frames) for clip in group])
        with clock.phase("encode"):
            encoder_output = self._encode(model, batch, wide)
        widened = self._wide is not None or True in self._openvino
        threads = self.wide_threads if wide and widened else self.cpu_threads
        for position, clip in enumerate(group):
            if clip.language is None and clip.detected is None:
                with clock.phase("detect"):
                    clip.detected = self._detect(model, encoder_output, position)
        again: list[_Clip] = []
        now: list[int] = []
        for position, clip in enumerate(group):
            floor = self.options.window_floor(clip.spoken)
            if clip.language is None and clip.window < floor:  # detected: a larger floor
                again.append(
                    clip.moved(window=self.options.first_window(clip.seconds, clip.spoken))
                )
            else:
                now.append(position)
        by_beams: dict[int, list[int]] = {}
        for position in now:
            by_beams.setdefault(group[position].beams, []).append(position)
        while by_beams:
            beams, positions = by_beams.popitem()
            clips = [group[p] for p in positions]
            output = _rows(encoder_output, positions, len(group))
            with clock.phase("decode"):
                transcripts = self._generate(model, output, clips, beams, began, threads)
            retry_beam: list[int] = []
            for position, clip, transcript in zip(positions, clips, transcripts, strict=True):
                step = guard_step(
                    self.options,
                    clip.window,
                    clip.beams,
                    clip.seconds,
                    transcript,
                    clip.unsure_before,
                )
                if step is None:
                    clip.answer = replace(transcript, attempts=clip.attempts)
                elif step == "beam":
                    clip.beams, clip.attempts = self.options.beam_size, clip.attempts + 1
                    retry_beam.append(position)
                else:
                    again.append(
                        clip.moved(
                            window=step,
                            attempts=clip.attempts + 1,
                            unsure_before=agreeable_text(self.options, transcript),
                        )
                    )
            if retry_beam:  # the same encoder output, decoded with the beam
                by_beams.setdefault(self.options.beam_size, []).extend(retry_beam)
        return again

    def _encode(self, model: WhisperModel, batch: np.ndarray, wide: bool) -> Any:
        if self._openvino:
            import ctranslate2

            encoder = self._openvino.get(wide, self._openvino[False])
            return ctranslate2.StorageView.from_array(encoder.encode(batch))
        if wide and self._wide is not None:
            from faster_whisper.transcribe import get_ctranslate2_storage

            return self._wide.encode(get_ctranslate2_storage(batch), to_cpu=False)
        return model.encode(batch)

    @staticmethod
    def _detect(model: WhisperModel, encoder_output: Any, position: int) -> tuple[str, float]:
        if not model.model.is_multilingual:
            return "en", 1.0
        token, probability = model.model.detect_language(encoder_output)[position][0]
        return token[2:-2], float(probability)

    def _frames(self, window_seconds: float) -> int:
        full = self._require_model().feature_extractor.nb_max_frames
        return full if window_seconds >= 30.0 else round(window_seconds * full / 30.0)

    def _generate(
        self,
        model: WhisperModel,
        encoder_output: Any,
        clips: list[_Clip],
        beams: int,
        began: float,
        encoder_threads: int,
    ) -> list[Transcript]:
        from faster_whisper.tokenizer import Tokenizer

        tokenizers = [
            Tokenizer(model.hf_tokenizer, model.model.is_multilingual, "transcribe", clip.spoken)
            for clip in clips
        ]
        prompts = [self._prompt(tokenizer) for tokenizer in tokenizers]
        o = self.options
        max_new = o.max_new_tokens if o.max_new_tokens is not None else model.max_length
        # CTranslate2 stops at half of prompt + max_new (114 tokens for 224): that is the
        # budget a runaway decode runs into
        budget = min(model.max_length - len(prompts[0]), max_new, (len(prompts[0]) + max_new) // 2)
        results = model.model.generate(
            encoder_output,
            prompts,
            beam_size=beams,
            patience=o.patience,
            length_penalty=1.0,
            repetition_penalty=1.0,
            no_repeat_ngram_size=0,
            max_length=min(model.max_length, len(prompts[0]) + max_new),
            return_scores=True,
            return_no_speech_prob=True,
            suppress_blank=True,
            suppress_tokens=list(self._suppress_tokens),
            max_initial_timestamp_index=round(1.0 / model.time_precision),
        )
        transcripts = []
        for result, tokenizer, clip in zip(results, tokenizers, clips, strict=True):
            tokens = result.sequences_ids[0]
            # faster-whisper's rule: a window that is likely silence and decoded with low
            # confidence holds no text.
            average = result.scores[0] * len(tokens) / (len(tokens) + 1)
            silent = (
                o.no_speech_threshold is not None
                and result.no_speech_prob > o.no_speech_threshold
                and not (o.log_prob_threshold is not None and average > o.log_prob_threshold)
            )
            text = "" if silent else tokenizer.decode(tokens).strip()
            language, probability = (clip.language, 1.0) if clip.language else clip.detected
            transcripts.append(
                Transcript(
                    text=text,
                    language=language,
                    language_probability=probability,
                    seconds=time.perf_counter() - began,
                    window_seconds=clip.window,
                    tokens=len(tokens),
                    budget_hit=len(tokens) >= budget,
                    avg_logprob=float(average),
                    beam_size=beams,
                    encoder_threads=encoder_threads,
                    encoder=self._encoder.label,
                    speech_seconds=round(clip.seconds, 3),
                )
            )
        return transcripts

    def transcribe_detailed(
        self, samples: np.ndarray, language: str | None, request: DecodeRequest
    ) -> Transcript:
        """One clip decoded as ``request`` asks, with faster-whisper's own ``transcribe`` and
        the engine's options (timestamp tokens decoded when timestamps are asked for, word
        timestamps from the cross-attention alignment). Segment and word times are in
        seconds from the clip's start, non-speech the VAD cut included. A plain request takes
        the batched path of :meth:`transcribe`, so the sites' clips never pay for this."""
        if request.plain:
            return self.transcribe(samples, language)
        model = self._require_model()
        check_call(samples, language, self._languages, self.name)
        if request.task == "translate" and not model.model.is_multilingual:
            raise RuntimeRefusal(
                "unsupported-option", f"the model {self.name} is English-only: it cannot translate"
            )
        began = time.perf_counter()
        o = self.options
        vad = None
        if o.vad_filter:
            vad = {
                "threshold": o.vad_threshold,
                "min_silence_duration_ms": o.vad_min_silence_ms,
                "speech_pad_ms": o.vad_speech_pad_ms,
            }
        pieces, info = model.transcribe(
            samples,
            language=language if model.model.is_multilingual else "en",
            task=request.task,
            beam_size=o.beam_size,
            patience=o.patience,
            temperature=DecodeOptions.TEMPERATURE,
            compression_ratio_threshold=None,
            log_prob_threshold=o.log_prob_threshold,
            no_speech_threshold=o.no_speech_threshold,
            condition_on_previous_text=o.condition_on_previous_text,
            initial_prompt=(
                prompt_tokens(model, request.prompt, o.max_new_tokens) if request.prompt else None
            ),
            without_timestamps=request.timestamps == "none",
            word_timestamps=request.timestamps == "word",
            vad_filter=o.vad_filter,
            vad_parameters=vad,
            max_new_tokens=o.max_new_tokens,
        )
        segments = tuple(_segment(piece) for piece in pieces)
        detected = language or (info.language if segments else None)
        probability = 1.0 if language else (info.language_probability if detected else 0.0)
        return Transcript(
            text="".join(segment.text for segment in segments).strip(),
            language=detected,
            language_probability=float(probability),
            seconds=time.perf_counter() - began,
            segments=segments if request.timestamps != "none" else (),
            encoder=self._encoder.label,
        )

    def encoder_frames(self, content_frames: int, language: str | None = None) -> int:
        """The mel frames the encoder is first given for a clip whose speech has
        ``content_frames`` frames: the whole 30 s window, or the window
        :meth:`DecodeOptions.first_window` chooses for it."""
        model = self._require_model()
        seconds = content_frames * 30.0 / model.feature_extractor.nb_max_frames
        return self._frames(self.options.first_window(seconds, language))

    def _prompt(self, tokenizer: Any) -> list[int]:
        prompt = list(tokenizer.sot_sequence)
        if self.options.without_timestamps:
            prompt.append(tokenizer.no_timestamps)
        return prompt

    def _require_model(self) -> WhisperModel:
        if self._model is None:
            raise RuntimeError("the backend is not loaded: call load() first")
        return self._model


class PhaseClock:
    """The seconds a batch spends in each of :data:`PHASES`, summed over its passes."""

    def __init__(self) -> None:
        self._seconds = dict.fromkeys(PHASES, 0.0)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block as part of phase ``name``."""
        began = time.perf_counter()
        try:
            yield
        finally:
            self._seconds[name] += time.perf_counter() - began

    def said(self) -> tuple[tuple[str, float], ...]:
        """Each phase's seconds, in the order of :data:`PHASES`."""
        return tuple((name, round(self._seconds[name], 6)) for name in PHASES)


def prompt_budget(multilingual: bool, max_new_tokens: int | None) -> int:
    """How many of a prompt's tokens fit in the decoder's context beside the start tokens
    (the previous-text mark, start, language, task, no-timestamps) and ``max_new_tokens``;
    at most Whisper's own half of the context less one (223), as OpenAI and Whisper keep."""
    start = 1 + (3 if multilingual else 1) + 1
    new = CONTEXT_TOKENS // 2 if max_new_tokens is None else max_new_tokens
    return max(0, min(CONTEXT_TOKENS // 2 - 1, CONTEXT_TOKENS - start - new))


def prompt_tokens(model: WhisperModel, prompt: str, max_new_tokens: int | None) -> list[int]:
    """The tokens of ``prompt`` the model is given: the last :func:`prompt_budget` of them
    (a longer prompt loses its beginning, as OpenAI's API cuts it)."""
    tokens = model.hf_tokenizer.encode(" " + prompt.strip(), add_special_tokens=False).ids
    keep = prompt_budget(model.model.is_multilingual, max_new_tokens)
    return list(tokens[-keep:]) if keep else []


def compression_ratio(text: str) -> float:
    """How much zlib shrinks ``text`` (its UTF-8 bytes over the compressed bytes): about 1 to
    2 for speech, more for text that repeats itself (faster-whisper's and Whisper's measure)."""
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0


def looks_degenerate(transcript: Transcript, options: DecodeOptions) -> bool:
    """Whether a short-window answer should be decoded again on the next larger window: its
    text repeats itself (compression ratio over ``options.compression_ratio_threshold``, or a
    phrase said twice in a row, :func:`says_a_phrase_twice`), or the decode ran to its token
    budget without ending, or its average token log-probability is below
    ``options.log_prob_threshold`` (the marks faster-whisper's own ``transcribe`` takes for a
    failed decode)."""
    if not transcript.text:
        return False
    if says_a_phrase_twice(transcript.text):
        return True
    limit = options.compression_ratio_threshold
    if limit is not None and compression_ratio(transcript.text) > limit:
        return True
    if transcript.budget_hit:
        return True
    floor = options.log_prob_threshold
    return (
        floor is not None
        and transcript.avg_logprob is not None
        and (transcript.avg_logprob < floor)
    )


def same_words(text: str, other: str) -> bool:
    """Whether two answers hold the same words (as :func:`normalized_words` reads them: case,
    punctuation and spacing left out)."""
    return normalized_words(text) == normalized_words(other)


def agreeable_text(options: DecodeOptions, transcript: Transcript) -> str | None:
    """What an answer the guard sends up a window leaves for the next window's answer to
    agree with (:func:`guard_step`'s ``unsure_before``): its text, or None when it looked
    degenerate (a degenerate answer is never a reason to stop)."""
    return None if looks_degenerate(transcript, options) else transcript.text


def guard_step(
    options: DecodeOptions,
    window: float,
    beams: int,
    speech_seconds: float,
    transcript: Transcript,
    unsure_before: str | None = None,
) -> float | str | None:
    """What the guard does with an answer decoded on ``window`` seconds with ``beams`` beams
    from ``speech_seconds`` of speech, in this order: decode it again on the next larger
    window (that window's seconds) when, on a short window, it looks degenerate
    (:func:`looks_degenerate`) or holds more tokens than its speech can
    (``options.max_tokens_per_second``); on the next larger window when, on a short window,
    it is below ``options.short_window_logprob``, unless it holds the same words as
    ``unsure_before`` (the unsure answer of the smaller window that sent it here: two windows
    agree, so the doubt is in the audio, not in the window); again with the beam on the same
    encoder output (``"beam"``) when it was greedy and is below
    ``options.greedy_fallback_logprob`` or looks degenerate; else keep it (None)."""
    o = options
    if not transcript.text:
        return None
    short = o.short_window_guard and window < 30.0
    if short:
        too_many = (
            o.max_tokens_per_second is not None
            and transcript.tokens > o.max_tokens_per_second * speech_seconds + o.TOKEN_SLACK
        )
        if too_many or looks_degenerate(transcript, o):
            return next(w for w in o.window_ladder() if w > window)
        unsure = (
            o.short_window_logprob is not None
            and (transcript.avg_logprob or 0.0) < o.short_window_logprob
        )
        agreed = unsure_before is not None and same_words(transcript.text, unsure_before)
        if unsure and not agreed:
            return next(w for w in o.window_ladder() if w > window)
    if beams == 1 and o.beam_size > 1:
        floor = o.greedy_fallback_logprob
        weak = floor is not None and (transcript.avg_logprob or 0.0) < floor
        if weak or (o.short_window_guard and looks_degenerate(transcript, o)):
            return "beam"
    return None


def _segment(piece: Any) -> Segment:
    """Our :class:`Segment` of one of faster-whisper's segments."""
    words = tuple(
        Word(round(w.start, 3), round(w.end, 3), w.word, round(float(w.probability), 4))
        for w in piece.words or ()
    )
    return Segment(
        start=round(piece.start, 3),
        end=round(piece.end, 3),
        text=piece.text,
        tokens=tuple(piece.tokens),
        avg_logprob=float(piece.avg_logprob),
        compression_ratio=float(piece.compression_ratio),
        no_speech_prob=float(piece.no_speech_prob),
        words=words,
    )


@dataclass
class _Clip:
    """One clip on its way through the window ladder: where its answer goes, its features,
    the language asked for (or detected), its speech's seconds, the window and beams of its
    next decode, and how many decodes it has had."""

    index: int
    features: np.ndarray
    language: str | None
    seconds: float
    window: float
    beams: int
    attempts: int = 1
    detected: tuple[str, float] | None = None
    answer: Transcript | None = None
    #: The text of the unsure answer that sent it up a window (None: none did).
    unsure_before: str | None = None

    @property
    def spoken(self) -> str:
        """The language it is decoded in: the one asked for, or the one detected."""
        if self.language is not None:
            return self.language
        assert self.detected is not None
        return self.detected[0]

    def moved(self, **changes: Any) -> _Clip:
        """The same clip, for another decode."""
        return replace(self, answer=None, **changes)


def _groups(clips: list[_Clip]) -> list[list[_Clip]]:
    """The clips by window, shortest first: one encoder pass each."""
    by_window: dict[float, list[_Clip]] = {}
    for clip in clips:
        by_window.setdefault(clip.window, []).append(clip)
    return [by_window[w] for w in sorted(by_window)]


def _rows(encoder_output: Any, positions: list[int], size: int) -> Any:
    """The encoder output of the batch rows at ``positions`` (all of it when they are all)."""
    if positions == list(range(size)):
        return encoder_output
    import ctranslate2

    return ctranslate2.StorageView.from_array(np.asarray(encoder_output)[positions])


def _transcript(text: str, language: str | None, probability: float, began: float) -> Transcript:
    return Transcript(
        text=text,
        language=language,
        language_probability=probability,
        seconds=time.perf_counter() - began,
    )


def _one_line(error: BaseException) -> str:
    """An error's first line, at most 200 characters, with its type when it says nothing."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return text[:200]

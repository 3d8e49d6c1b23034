"""A speech backend on PyTorch: transformers' ``WhisperForConditionalGeneration`` run on the
weights of the CTranslate2 model folder, on the CPU (float32) or CUDA (float16).

It answers as :class:`~byoa_skills.runtimes.WhisperCT2Backend` does with greedy decoding (same
VAD, same features, same prompt, suppressed tokens, step limit and no-speech check, language
detected from the same encoder output), and adds :meth:`WhisperTorchBackend.transcribe_batch`,
which runs the encoder and the decoder once for many clips. torch, transformers and
faster-whisper are imported by :meth:`WhisperTorchBackend.load`, not when this module is.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from byoa_skills.runtimes.speech.base import SpeechBackend, Transcript, check_call
from byoa_skills.runtimes.speech.errors import RuntimeRefusal
from byoa_skills.runtimes.speech.options import DecodeOptions
from byoa_skills.runtimes.speech.torch_weights import WhisperWeights, load_whisper_weights
from byoa_skills.runtimes.speech.vad import load_vad, speech_only

if TYPE_CHECKING:
    import torch

#: The devices the backend runs on.
DEVICES = ("cpu", "cuda")
#: The dtype ``compute_type="default"`` stands for on each device.
DEFAULT_COMPUTE_TYPES = {"cpu": "float32", "cuda": "float16"}
COMPUTE_TYPES = ("float32", "float16", "bfloat16")
#: The options the backend uses when given none: the engine's, decoded greedily.
GREEDY = DecodeOptions(beam_size=1)
#: Most clips one batch holds on the CPU, where a bigger batch adds memory, not speed.
CPU_MAX_BATCH = 8
#: Most clips one batch holds on CUDA, whatever the free memory allows.
CUDA_MAX_BATCH = 64
#: Share of the GPU's free memory (measured at load) that batches may plan to use.
CUDA_MEMORY_SHARE = 0.5


@dataclass(frozen=True)
class _Heard:
    text: str
    language: str | None
    probability: float


class WhisperTorchBackend(SpeechBackend):
    """Whisper from a CTranslate2 model folder (``model.bin``, ``config.json``,
    ``tokenizer.json``), run by PyTorch and decoded greedily with :class:`DecodeOptions`.

    The weights are converted once and cached next to ``model.bin`` (see
    :mod:`~byoa_skills.runtimes.speech.torch_weights`); the model's shape comes from them and from
    the folder's own ``config.json`` and ``tokenizer.json``. Nothing is ever downloaded.
    """

    def __init__(
        self,
        model_dir: str | os.PathLike[str],
        *,
        device: str = "cpu",
        compute_type: str = "default",
        cpu_threads: int = 0,
        options: DecodeOptions | None = None,
        name: str | None = None,
        max_batch_size: int = 0,
    ) -> None:
        """Set the backend up; nothing is loaded until :meth:`load`.

        ``compute_type`` ``"default"`` is float32 on the CPU and float16 on CUDA; ``float32``,
        ``float16`` or ``bfloat16`` may be named. ``cpu_threads`` > 0 sets PyTorch's thread
        count for the whole process (0 leaves PyTorch's choice). ``options`` must decode
        greedily (``beam_size=1``) over the whole window (``encoder_seconds=None``); the
        default is :data:`GREEDY`. ``max_batch_size`` bounds
        the clips one encoder pass takes (0: :data:`CPU_MAX_BATCH` on the CPU; on CUDA what
        half the free memory holds, at most :data:`CUDA_MAX_BATCH`).
        """
        if device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
        resolved = DEFAULT_COMPUTE_TYPES[device] if compute_type == "default" else compute_type
        if resolved not in COMPUTE_TYPES:
            raise ValueError(f"compute_type must be one of {', '.join(COMPUTE_TYPES)} or default")
        if cpu_threads < 0 or max_batch_size < 0:
            raise ValueError("cpu_threads and max_batch_size must be >= 0")
        options = options if options is not None else GREEDY
        if options.beam_size != 1:
            raise ValueError(
                f"the torch backend decodes greedily: beam_size must be 1, got {options.beam_size}"
            )
        if options.encoder_seconds is not None:
            raise ValueError(
                "the torch backend encodes the whole 30 s window: encoder_seconds must be None"
            )
        self.model_dir = Path(model_dir)
        self.name = name if name is not None else self.model_dir.name
        self.device = device
        self.compute_type = resolved
        self.cpu_threads = cpu_threads
        self.options = options
        self._max_batch_size = max_batch_size
        self._model: Any = None
        self._weights_converted = False
        self._languages: frozenset[str] = frozenset()

    def load(self) -> None:
        """Convert or read the cached weights, build the model on its device, load the VAD.
        Idempotent.

        Raises ``FileNotFoundError`` without ``model.bin`` or ``tokenizer.json``,
        ``ValueError`` for a model.bin that cannot be converted, and PyTorch's errors when
        the device cannot take the model.
        """
        if self._model is not None:
            return
        for file in ("model.bin", "tokenizer.json", "config.json"):
            if not (self.model_dir / file).is_file():
                raise FileNotFoundError(f"no {file} in {self.model_dir}")
        import tokenizers
        import torch
        from faster_whisper.feature_extractor import FeatureExtractor
        from faster_whisper.tokenizer import Tokenizer
        from faster_whisper.transcribe import get_suppressed_tokens

        if self.cpu_threads > 0:
            torch.set_num_threads(self.cpu_threads)
        weights = load_whisper_weights(self.model_dir)
        folder_config = json.loads((self.model_dir / "config.json").read_text(encoding="utf-8"))
        hf_tokenizer = tokenizers.Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        vocab = weights.state["model.decoder.embed_tokens.weight"].shape[0]
        # Whisper's rule, which CTranslate2 and faster-whisper follow too.
        self._multilingual = vocab >= 51865
        english = Tokenizer(hf_tokenizer, self._multilingual, "transcribe", "en")
        self._hf_tokenizer = hf_tokenizer
        self._eot = english.eot
        self._sot = english.sot
        self._no_speech = english.no_speech
        self._suppress = torch.tensor(get_suppressed_tokens(english, [-1]), dtype=torch.long)
        self._suppress_begin = torch.tensor(folder_config["suppress_ids_begin"], dtype=torch.long)
        self._language_ids = [int(i) for i in folder_config.get("lang_ids", [])]
        if self._multilingual:
            codes = [hf_tokenizer.id_to_token(i)[2:-2] for i in self._language_ids]
            self._language_codes = codes
            self._languages = frozenset(codes)
        else:
            self._language_codes = []
            self._languages = frozenset({"en"})
        self._dtype = getattr(torch, self.compute_type)
        self._torch_device = torch.device(self.device)
        model = _build_model(weights, folder_config, english, self._torch_device, self._dtype)
        n_mels = int(weights.state["model.encoder.conv1.weight"].shape[1])
        self._features = FeatureExtractor(feature_size=n_mels)
        self._batch_bound = self._max_batch_size or self._default_batch_bound(model)
        if self.options.vad_filter:
            self._vad_options = load_vad(self.options)
        self._weights_converted = weights.converted
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
        self._require_model()
        return self._multilingual

    @property
    def max_batch_size(self) -> int:
        """The most clips one encoder pass takes; bigger batches are run in parts."""
        self._require_model()
        return self._batch_bound

    @property
    def weights_converted(self) -> bool:
        """Whether :meth:`load` converted ``model.bin`` (``False``: it read a verified cache)."""
        return self._weights_converted

    @property
    def model(self) -> Any:
        """The loaded transformers ``WhisperForConditionalGeneration``."""
        return self._require_model()

    def transcribe_batch(
        self, items: Sequence[tuple[np.ndarray, str | None]], *, wide: bool = False
    ) -> list[Transcript | RuntimeRefusal]:
        """Each clip's text, from batched encoder passes and batched greedy decoding.

        ``items`` are ``(samples, language)`` pairs as :meth:`transcribe` takes them; their
        languages may differ. An item that cannot be answered gets its
        :class:`RuntimeRefusal` in its place and costs the others nothing. The clips run in
        batches of at most :attr:`max_batch_size`; each answer's text and language are those
        :meth:`transcribe` gives for the clip alone (a detected language's probability may
        differ in the last float32 digits), and its ``seconds`` is the batch's wall time.
        """
        began = time.perf_counter()
        self._require_model()
        answers: list[_Heard | RuntimeRefusal | None] = [None] * len(items)
        pending: list[tuple[int, np.ndarray, str | None]] = []
        for index, (samples, language) in enumerate(items):
            try:
                check_call(samples, language, self._languages, self.name)
            except RuntimeRefusal as refusal:
                answers[index] = refusal
                continue
            audio = speech_only(samples, self._vad_options) if self.options.vad_filter else samples
            if audio.size == 0:
                answers[index] = _Heard("", language, 1.0 if language else 0.0)
            else:
                pending.append((index, audio, language))
        for start in range(0, len(pending), self._batch_bound):
            part = pending[start : start + self._batch_bound]
            heard = self._decode([audio for _, audio, _ in part], [lang for *_, lang in part])
            for (index, _, _), answer in zip(part, heard, strict=True):
                answers[index] = answer
        seconds = time.perf_counter() - began
        return [
            Transcript(a.text, a.language, a.probability, seconds) if isinstance(a, _Heard) else a
            for a in answers
            if a is not None
        ]

    def _require_model(self) -> Any:
        if self._model is None:
            raise RuntimeError("the backend is not loaded: call load() first")
        return self._model

    def _window(self, audio: np.ndarray) -> np.ndarray:
        """The log-Mel features of the clip's first 30 s window, padded to 30 s: exactly what
        the CTranslate2 backend encodes."""
        from faster_whisper.audio import pad_or_trim

        features = self._features(audio)
        window = min(self._features.nb_max_frames, features.shape[-1] - 1)
        return pad_or_trim(features[:, :window])

    def _decode(self, clips: list[np.ndarray], languages: list[str | None]) -> list[_Heard]:
        """Encode the clips together, detect missing languages from the same encoder output,
        and decode greedily as CTranslate2's ``Whisper.generate`` does."""
        import torch
        from faster_whisper.tokenizer import Tokenizer

        model = self._model
        device = self._torch_device
        features = np.stack([self._window(audio) for audio in clips])
        with torch.inference_mode():
            inputs = torch.from_numpy(features).to(device=device, dtype=self._dtype)
            encoded = model.model.encoder(input_features=inputs).last_hidden_state
            batch = len(clips)
            sot = torch.full((batch, 1), self._sot, dtype=torch.long, device=device)
            step = model.model.decoder(input_ids=sot, encoder_hidden_states=encoded, use_cache=True)
            first = model.proj_out(step.last_hidden_state[:, -1]).float()
            no_speech = torch.softmax(first, dim=-1)[:, self._no_speech].tolist()
            chosen, probabilities = self._languages_of(first, languages)
            prompts = [
                [
                    *Tokenizer(
                        self._hf_tokenizer, self._multilingual, "transcribe", code
                    ).sot_sequence,
                    self._no_timestamps_id(),
                ]
                for code in chosen
            ]
            rest = torch.tensor([p[1:] for p in prompts], dtype=torch.long, device=device)
            step = model.model.decoder(
                input_ids=rest,
                encoder_hidden_states=encoded,
                past_key_values=step.past_key_values,
                use_cache=True,
            )
            tokens, scores = self._greedy(model, encoded, step, len(prompts[0]))
        answers = []
        for i in range(batch):
            # faster-whisper's average log-probability: the end token counts as one more.
            average = scores[i] / (len(tokens[i]) + 1)
            text = self._hf_tokenizer.decode([t for t in tokens[i] if t < self._eot]).strip()
            if self._is_silence(no_speech[i], average):
                text = ""
            answers.append(_Heard(text, chosen[i], probabilities[i]))
        return answers

    def _languages_of(
        self, first: torch.Tensor, languages: list[str | None]
    ) -> tuple[list[str], list[float]]:
        """Each clip's language and its probability: 1.0 when given or the model knows only
        English; else the most likely language token after ``<|startoftranscript|>``, its
        probability taken over the language tokens alone (as CTranslate2's
        ``detect_language``)."""
        import torch

        if not self._multilingual or all(code is not None for code in languages):
            return [code or "en" for code in languages], [1.0] * len(languages)
        ids = torch.tensor(self._language_ids, dtype=torch.long, device=first.device)
        probabilities = torch.softmax(first[:, ids], dim=-1)
        best_p, best = probabilities.max(dim=-1)
        codes, chances = [], []
        for i, code in enumerate(languages):
            if code is None:
                codes.append(self._language_codes[int(best[i])])
                chances.append(float(best_p[i]))
            else:
                codes.append(code)
                chances.append(1.0)
        return codes, chances

    def _greedy(
        self, model: Any, encoded: torch.Tensor, step: Any, prompt_length: int
    ) -> tuple[list[list[int]], list[float]]:
        """Greedy decoding from the prompt's last logits: the generated tokens (no end token)
        and each sequence's summed log-probability (end token included)."""
        import torch

        o = self.options
        total = prompt_length + (o.max_new_tokens if o.max_new_tokens is not None else 448)
        # CTranslate2 decodes at most half the total length (prompt + new tokens), counted
        # from the prompt's last token.
        max_steps = min(total // 2, total - (prompt_length - 1))
        batch = encoded.shape[0]
        device = encoded.device
        suppress = self._suppress.to(device)
        suppress_begin = self._suppress_begin.to(device)
        tokens: list[list[int]] = [[] for _ in range(batch)]
        scores = [0.0] * batch
        alive = list(range(batch))  # row r of the running batch is clip alive[r]
        cache = step.past_key_values
        logits = model.proj_out(step.last_hidden_state[:, -1]).float()
        for n in range(max_steps):
            logits[:, suppress] = -float("inf")
            if n == 0:
                logits[:, suppress_begin] = -float("inf")
            log_probs = torch.log_softmax(logits, dim=-1)
            best_p, best = log_probs.max(dim=-1)
            keep = []
            for row, (token, p) in enumerate(zip(best.tolist(), best_p.tolist(), strict=True)):
                clip = alive[row]
                scores[clip] += p
                if token != self._eot:
                    tokens[clip].append(token)
                    keep.append(row)
            if not keep or n == max_steps - 1:
                break
            if len(keep) < len(alive):
                rows = torch.tensor(keep, dtype=torch.long, device=device)
                cache.batch_select_indices(rows)
                encoded = encoded[rows]
                best = best[rows]
                alive = [alive[row] for row in keep]
            step = model.model.decoder(
                input_ids=best[:, None],
                encoder_hidden_states=encoded,
                past_key_values=cache,
                use_cache=True,
            )
            cache = step.past_key_values
            logits = model.proj_out(step.last_hidden_state[:, -1]).float()
        return tokens, scores

    def _is_silence(self, no_speech: float, average_log_prob: float) -> bool:
        """Whisper's no-speech check, as faster-whisper applies it."""
        o = self.options
        if o.no_speech_threshold is None or no_speech <= o.no_speech_threshold:
            return False
        return not (o.log_prob_threshold is not None and average_log_prob > o.log_prob_threshold)

    def _no_timestamps_id(self) -> int:
        return int(self._hf_tokenizer.token_to_id("<|notimestamps|>"))

    def _default_batch_bound(self, model: Any) -> int:
        if self.device != "cuda":
            return CPU_MAX_BATCH
        import torch

        free, _ = torch.cuda.mem_get_info(self._torch_device)
        return cuda_batch_bound(model.config, free, torch.finfo(self._dtype).bits // 8)


def cuda_batch_bound(config: Any, free_bytes: int, dtype_bytes: int) -> int:
    """How many clips one batch may hold on a GPU with ``free_bytes`` free (after the model is
    loaded): :data:`CUDA_MEMORY_SHARE` of it divided by :func:`bytes_per_clip`, at least 1 and
    at most :data:`CUDA_MAX_BATCH`."""
    share = int(free_bytes * CUDA_MEMORY_SHARE) // bytes_per_clip(config, dtype_bytes)
    return max(1, min(CUDA_MAX_BATCH, share))


def bytes_per_clip(config: Any, dtype_bytes: int) -> int:
    """An upper estimate of the device memory one clip of a batch takes: its features, the
    encoder's largest activations (a feed-forward layer, and one layer's attention scores
    should PyTorch materialise them), the decoder's self- and cross-attention caches, and
    float32 logits."""
    d, frames = config.d_model, config.max_source_positions
    features = config.num_mel_bins * frames * 2
    encoder = frames * (config.encoder_ffn_dim + 3 * d)
    scores = config.encoder_attention_heads * frames * frames
    caches = 2 * config.decoder_layers * d * (frames + config.max_target_positions)
    activations = (features + encoder + scores + caches) * dtype_bytes
    return activations + 3 * config.vocab_size * 4


def _build_model(
    weights: WhisperWeights, folder_config: dict[str, Any], english: Any, device: Any, dtype: Any
) -> Any:
    """transformers' ``WhisperForConditionalGeneration`` with these weights, its config made
    from their shapes and the folder's own config.json and tokenizer: nothing is fetched."""
    import torch
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    state = weights.state
    embed = state["model.decoder.embed_tokens.weight"]
    config = WhisperConfig(
        vocab_size=embed.shape[0],
        num_mel_bins=state["model.encoder.conv1.weight"].shape[1],
        d_model=embed.shape[1],
        encoder_layers=_count_layers(state, "encoder"),
        decoder_layers=_count_layers(state, "decoder"),
        encoder_attention_heads=weights.encoder_heads,
        decoder_attention_heads=weights.decoder_heads,
        encoder_ffn_dim=state["model.encoder.layers.0.fc1.weight"].shape[0],
        decoder_ffn_dim=state["model.decoder.layers.0.fc1.weight"].shape[0],
        max_source_positions=state["model.encoder.embed_positions.weight"].shape[0],
        max_target_positions=state["model.decoder.embed_positions.weight"].shape[0],
        pad_token_id=english.eot,
        bos_token_id=english.eot,
        eos_token_id=english.eot,
        decoder_start_token_id=english.sot,
        suppress_tokens=list(folder_config.get("suppress_ids", [])),
        begin_suppress_tokens=list(folder_config.get("suppress_ids_begin", [])),
        scale_embedding=False,
        activation_function="gelu",
        tie_word_embeddings=True,
    )
    with torch.device("meta"):
        model = WhisperForConditionalGeneration(config)
    tensors = {name: torch.from_numpy(array) for name, array in state.items()}
    model.load_state_dict(tensors, strict=True, assign=True)
    model.tie_weights()
    return model.to(device=device, dtype=dtype).eval()


def _count_layers(state: dict[str, np.ndarray], side: str) -> int:
    prefix = f"model.{side}.layers."
    return len({name[len(prefix) :].split(".")[0] for name in state if name.startswith(prefix)})

"""The ``models`` block of a ``text.generate`` skill: what a site asks of the visitor's models,
checked before anything is shown, and the visitor's ticks checked against it.

A manifest's ``skills["text.generate"].models`` (see ``docs/models-block.md``)::

    {"count": 2, "required": 1, "differentCompanies": true,
     "why": "two answers from two makers, side by side", "prefer": ["llama", "qwen"]}

``count`` models are asked for, ``required`` of them are needed for Allow (the rest are only
recommended), ``differentCompanies`` asks that no two ticked models come from one company,
``why`` says what the site does with them, ``prefer`` names the models it recommends (the
consent ticks the offered models whose name holds one of them, and nothing else). A skill
without a block asks for one model, needed when the skill is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from byoa_skills.skills.registry import models_skills, uses_models

#: The most models one site may ask for.
MAX_MODELS = 8
#: The longest ``why``, in code points.
MAX_WHY_CHARS = 300
#: The longest name in ``prefer``, in code points.
MAX_PREFER_CHARS = 100
_FIELDS = ("count", "required", "differentCompanies", "why", "prefer")

#: The company a model's name says made it: a pattern of the name, and the company.
COMPANIES: tuple[tuple[str, str], ...] = (
    (r"llama|meta-", "Meta"),
    (r"qwen|qwq|alibaba", "Alibaba"),
    (r"mistral|mixtral|codestral|ministral|devstral|pixtral", "Mistral AI"),
    (r"gemma|gemini|google", "Google"),
    (r"\bphi|microsoft|wizardlm", "Microsoft"),
    (r"gpt|openai|\bo[134]\b|\bo[134]-", "OpenAI"),
    (r"claude|anthropic", "Anthropic"),
    (r"deepseek", "DeepSeek"),
    (r"smollm|huggingface|zephyr", "Hugging Face"),
    (r"command|cohere|aya", "Cohere"),
    (r"granite|\bibm", "IBM"),
    (r"falcon|tiiuae", "TII"),
    (r"olmo|allenai|tulu", "Ai2"),
    (r"\byi\b|yi-|01-ai", "01.AI"),
    (r"glm|chatglm|zhipu|thudm", "Zhipu AI"),
    (r"kimi|moonshot", "Moonshot AI"),
    (r"grok|x-ai|xai", "xAI"),
    (r"nemotron|nvidia", "NVIDIA"),
    (r"minimax", "MiniMax"),
    (r"ernie|baidu", "Baidu"),
    (r"internlm|shanghai", "Shanghai AI Lab"),
    (r"stablelm|stability", "Stability AI"),
)
_COMPANY_PATTERNS = tuple((re.compile(p, re.IGNORECASE), name) for p, name in COMPANIES)


@dataclass(frozen=True)
class ModelsBlock:
    """A ``text.generate`` skill's models block, read from a manifest that passed the checks."""

    count: int = 1
    required: int = 1
    different_companies: bool = False
    why: str = ""
    prefer: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The block as a manifest writes it (every field stated)."""
        return {
            "count": self.count,
            "required": self.required,
            "differentCompanies": self.different_companies,
            "why": self.why,
            "prefer": list(self.prefer),
        }


@dataclass(frozen=True)
class OfferedModel:
    """A model a text source offers now: ``ref`` is ``SOURCE/MODEL``, as a grant names it."""

    source: str
    model: str
    company: str | None = field(default=None)

    @property
    def ref(self) -> str:
        """``SOURCE/MODEL``."""
        return f"{self.source}/{self.model}"


def company_of(model: str) -> str | None:
    """The company the model's name says made it (``llama-3.1-8b`` → Meta), or None when the
    name does not say."""
    for pattern, company in _COMPANY_PATTERNS:
        if pattern.search(model):
            return company
    return None


def offered(source: str, model: str) -> OfferedModel:
    """An :class:`OfferedModel` with the company its name says."""
    return OfferedModel(source, model, company_of(model))


def block_problems(manifest: Any) -> list[dict[str, str]]:
    """Every problem ``{code, path, message}`` with the manifest's models blocks (JSON Pointer
    paths); ``[]`` when there is none or they are well formed. A block on a skill that does
    not use models (:attr:`~byoa_skills.skills.base.Skill.uses_models`, only ``text.generate``
    does) is ``models-not-for-skill``; a malformed one ``models-invalid``."""
    skills = manifest.get("skills") if isinstance(manifest, dict) else None
    if not isinstance(skills, dict):
        return []
    problems: list[dict[str, str]] = []
    for name, entry in skills.items():
        if not isinstance(entry, dict) or "models" not in entry:
            continue
        path = f"/skills/{_pointer(str(name))}/models"
        if not uses_models(str(name)):
            takers = ", ".join(models_skills())
            problems.append(
                _problem("models-not-for-skill", path, f"only {takers} takes a models block")
            )
            continue
        problems += _problems_of(entry["models"], path)
    return problems


def _problems_of(block: Any, path: str) -> list[dict[str, str]]:
    if not isinstance(block, dict):
        return [_problem("models-invalid", path, "the models block must be a JSON object")]
    found = [
        _problem("models-invalid", f"{path}/{_pointer(str(key))}", f"unknown field {key!r}")
        for key in block
        if key not in _FIELDS
    ]
    count = block.get("count")
    if not _whole(count) or not 1 <= count <= MAX_MODELS:
        found.append(
            _problem(
                "models-invalid",
                f"{path}/count",
                f"count must be a whole number from 1 to {MAX_MODELS}",
            )
        )
        count = MAX_MODELS
    required = block.get("required", count)
    if not _whole(required) or not 0 <= required <= count:
        found.append(
            _problem(
                "models-invalid",
                f"{path}/required",
                "required must be a whole number from 0 to count",
            )
        )
    if not isinstance(block.get("differentCompanies", False), bool):
        found.append(
            _problem(
                "models-invalid",
                f"{path}/differentCompanies",
                "differentCompanies must be true or false",
            )
        )
    why = block.get("why")
    if not isinstance(why, str) or not why.strip() or len(why) > MAX_WHY_CHARS:
        found.append(
            _problem(
                "models-invalid",
                f"{path}/why",
                f"why must say, in 1 to {MAX_WHY_CHARS} characters, "
                "what the site does with the models",
            )
        )
    prefer = block.get("prefer", [])
    if not isinstance(prefer, list) or len(prefer) > MAX_MODELS:
        found.append(
            _problem(
                "models-invalid",
                f"{path}/prefer",
                f"prefer must be a list of at most {MAX_MODELS} names",
            )
        )
    else:
        found += [
            _problem(
                "models-invalid",
                f"{path}/prefer/{index}",
                f"a preferred model is a name of 1 to {MAX_PREFER_CHARS} characters",
            )
            for index, name in enumerate(prefer)
            if not isinstance(name, str) or not name.strip() or len(name) > MAX_PREFER_CHARS
        ]
    return found


def read_block(manifest: Mapping[str, Any]) -> ModelsBlock | None:
    """The ``text.generate`` skill's block of a checked manifest (the default one model, needed
    when the skill is, when it states none); None when the manifest asks no text skill."""
    skills = manifest.get("skills")
    entries = skills.items() if isinstance(skills, dict) else ()
    entry = next((entry for name, entry in entries if uses_models(name)), None)
    if not isinstance(entry, dict):
        return None
    block = entry.get("models")
    if not isinstance(block, dict):
        return ModelsBlock(count=1, required=1 if entry.get("required") is True else 0)
    count = int(block["count"])
    return ModelsBlock(
        count=count,
        required=int(block.get("required", count)),
        different_companies=block.get("differentCompanies") is True,
        why=str(block.get("why", "")),
        prefer=tuple(str(name) for name in block.get("prefer", [])),
    )


def tick_problems(block: ModelsBlock, ticked: Sequence[OfferedModel]) -> list[dict[str, str]]:
    """Why the visitor's ticks do not satisfy ``block`` (``[]`` when they do):
    ``too-few-models`` under ``required``, ``too-many-models`` over ``count``, ``same-company``
    for two ticked models whose names say one company (a name that says no company counts as
    its own), ``model-ticked-twice``."""
    problems = []
    refs = [model.ref for model in ticked]
    if len(set(refs)) != len(refs):
        problems.append(_problem("model-ticked-twice", "/models", "a model is ticked twice"))
    if len(ticked) < block.required:
        problems.append(
            _problem("too-few-models", "/models", f"tick at least {block.required} model(s)")
        )
    if len(ticked) > block.count:
        problems.append(
            _problem(
                "too-many-models", "/models", f"the site asks for at most {block.count} model(s)"
            )
        )
    if block.different_companies:
        companies = [model.company for model in ticked if model.company is not None]
        if len(set(companies)) != len(companies):
            problems.append(
                _problem(
                    "same-company", "/models", "the site asks for models from different companies"
                )
            )
    return problems


def preticked(block: ModelsBlock, models: Iterable[OfferedModel]) -> list[OfferedModel]:
    """The offered models the consent ticks before the visitor does: those whose name holds a
    name of ``prefer`` (in the order ``prefer`` gives), at most ``count``, one per company when
    the block asks for different companies. Nothing the site did not name."""
    chosen: list[OfferedModel] = []
    offered_now = list(models)
    for wanted in block.prefer:
        for model in offered_now:
            if len(chosen) >= block.count:
                return chosen
            if wanted.lower() not in model.model.lower() or not _may_join(block, model, chosen):
                continue
            chosen.append(model)
            break
    return chosen


def fallback_ticks(
    block: ModelsBlock, models: Sequence[OfferedModel], default: str | None
) -> list[OfferedModel]:
    """The ticks an Allow with no page to tick on gives (``connect --decision allow``): the
    preferred models, then the default model, then the others in the sources' order, until
    ``required`` (at least one) are ticked within the block's rules; fewer when the models on
    offer cannot make up as many."""
    wanted = max(block.required, 1)
    chosen = preticked(block, models)[:wanted]
    ordered = sorted(models, key=lambda m: m.ref != default)
    for model in ordered:
        if len(chosen) >= wanted:
            break
        if _may_join(block, model, chosen):
            chosen.append(model)
    return chosen


def _may_join(block: ModelsBlock, model: OfferedModel, chosen: list[OfferedModel]) -> bool:
    """Whether ``model`` may be ticked beside ``chosen``: not ticked already, and of another
    company than each of them when the block asks for different companies."""
    if model in chosen:
        return False
    return not (
        block.different_companies
        and model.company is not None
        and any(other.company == model.company for other in chosen)
    )


def model_codes(ticked: Sequence[OfferedModel]) -> dict[str, str]:
    """The grant's ``models``: ``m1`` → ``SOURCE/MODEL`` in the order ticked."""
    return {f"m{index}": model.ref for index, model in enumerate(ticked, start=1)}


def grouped(models: Iterable[OfferedModel]) -> list[dict[str, Any]]:
    """The models by company, as the consent lists them: companies by name, the models whose
    name says none last, under ``None``."""
    groups: dict[str | None, list[OfferedModel]] = {}
    for model in models:
        groups.setdefault(model.company, []).append(model)
    order = sorted(groups, key=lambda company: (company is None, company or ""))
    return [
        {
            "company": company,
            "models": [
                {"ref": m.ref, "source": m.source, "model": m.model} for m in groups[company]
            ],
        }
        for company in order
    ]


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _pointer(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _problem(code: str, path: str, message: str) -> dict[str, str]:
    return {"code": code, "path": path, "message": message}

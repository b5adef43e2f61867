"""The model registry: ``registry.yaml`` validated by pydantic. A new model is a new YAML entry.

Each entry says where the model lives (HF repo id or API model name), which backends can serve
it, the box convention it answers in (:class:`BoxFormat`), the image-size limits the runner must
respect before sending, and chat quirks (system role, thinking tags, sampling parameters the API
refuses). What holds for every model of a family (how its weights load, what its processor takes) is
stated once, under ``families:`` (:class:`FamilyFacts`), and reaches each entry as ``entry.family_facts``:
backends read facts, never family names.
"""
from __future__ import annotations

import difflib
from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from mmbu.benchmark_eval.models.box_format import BoxFormat, SmartResize
from mmbu.core.yaml_io import read_yaml

REGISTRY_PATH = Path(__file__).with_name("registry.yaml")
BackendName = Literal["openai", "vllm", "hf"]


class RegistryError(Exception):
    """The registry file is invalid or a model name is unknown; the message says which."""


class SquarePad(BaseModel):
    """Pad to a square canvas as the model was trained: where the image sits on it and the fill colour."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    position: Literal["center", "top_left"] = "center"
    fill: tuple[int, int, int] = (0, 0, 0)

    @field_validator("fill")
    @classmethod
    def _rgb(cls, value: tuple[int, int, int]) -> tuple[int, int, int]:
        if not all(0 <= v <= 255 for v in value):
            raise ValueError("fill is an RGB colour, three values 0-255")
        return value


class ImageLimits(BaseModel):
    """What the runner does to an image before sending it to this model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_pixels: int | None = None      # downscale (aspect kept) so w*h <= this
    max_side: int | None = None        # downscale so max(w, h) <= this
    # pad to a square canvas: "top_left" (black, right/bottom) or {position: center|top_left, fill: [r, g, b]}
    pad_to_square: Literal["none", "top_left"] | SquarePad = "none"
    encoding: Literal["png", "jpeg"] = "png"
    max_bytes: int | None = None       # encoded size cap (APIs); JPEG quality is lowered to fit

    @property
    def square_pad(self) -> SquarePad | None:
        """The padding as a :class:`SquarePad` (None: no padding)."""
        if self.pad_to_square == "none":
            return None
        return SquarePad(position="top_left") if self.pad_to_square == "top_left" else self.pad_to_square


class ChatQuirks(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    system_prompt: bool = True                       # False: the system text is folded into the user turn
    thinking_tags: tuple[str, str] | None = None     # (open, close) of reasoning the parser must strip
    # The chat template opens the reasoning block in the prompt: a reply is reasoning until the close
    # tag, and a reply without one never reached an answer. It shapes no request (not in request hashes).
    thinking_prefilled: bool = False
    temperature: bool = True                         # False: the API refuses a temperature other than its default
    seed: bool = True
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"


class Sources(BaseModel):
    """Where each convention of an entry comes from: the model's card, repository or processor code."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    box_format: str
    image: str
    reasoning: str


class FamilyFacts(BaseModel):
    """What holds for every model of a family, where the backends that load weights need to know it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # the HF repository ships its own model code, which transformers and vLLM run only when told to trust it
    trust_remote_code: bool = False
    # the image processor takes `max_pixels` (vLLM `mm_processor_kwargs`): the server's resize is bounded by the
    # entry's `image.max_pixels`
    processor_max_pixels: bool = False
    source: str | None = None  # where the facts were read


class ModelEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str                                  # what --model takes and records carry
    display_name: str                          # the paper's name
    hf_id: str | None = None                   # Hugging Face repo for open weights
    api_model: str | None = None               # the provider's model name for hosted APIs
    revision: str | None = None                # pinned HF revision, when known
    family: str
    family_facts: FamilyFacts = Field(default_factory=FamilyFacts)  # from the registry's `families:`
    backends: tuple[BackendName, ...] = ("openai", "vllm", "hf")
    default_base_url: str | None = None        # hosted APIs only
    box_format: BoxFormat
    image: ImageLimits = Field(default_factory=ImageLimits)
    chat: ChatQuirks = Field(default_factory=ChatQuirks)
    max_tokens: int = 512
    aliases: tuple[str, ...] = ()
    notes: str | None = None
    source: Sources

    @model_validator(mode="after")
    def _consistent(self) -> ModelEntry:
        if not (self.hf_id or self.api_model):
            raise ValueError("an entry needs an hf_id or an api_model")
        resize = self.box_format.resize
        if isinstance(resize, SmartResize) and self.image.max_pixels not in (None, resize.max_pixels):
            raise ValueError("image.max_pixels must equal box_format.resize.max_pixels (the image is sent smart-resized)")
        return self

    @property
    def served_name(self) -> str:
        """The name to put in the request's ``model`` field by default."""
        return self.api_model or self.hf_id or self.name

    @property
    def slug(self) -> str:
        return model_slug(self.name)


def model_slug(name: str) -> str:
    """A folder name for a model: ``Qwen/Qwen2.5-VL-7B-Instruct`` -> ``Qwen__Qwen2.5-VL-7B-Instruct``.

    Always one plain folder inside the runs folder: ASCII letters, digits and ``._-``, never hidden, ``.`` or ``..``
    (an ad-hoc `--model ..` would otherwise write its run into the runs folder's parent)."""
    slug = "".join(c if (c.isascii() and c.isalnum()) or c in "._-" else "_" for c in name.replace("/", "__"))
    return "_" + slug if not slug or slug.startswith(".") else slug


class Registry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int
    families: dict[str, FamilyFacts] = Field(default_factory=dict)
    models: list[ModelEntry]

    @model_validator(mode="before")
    @classmethod
    def _family_facts(cls, data: object) -> object:
        """Give each entry its family's facts. When `families:` is written, every entry's family must be in it (a
        misspelt family would otherwise load with no facts); an entry never states them itself."""
        if not isinstance(data, dict) or not isinstance(data.get("models"), list):
            return data
        families = data.get("families") or {}
        models = []
        for entry in data["models"]:
            if isinstance(entry, dict):
                if "family_facts" in entry:
                    raise ValueError(f"model {entry.get('name')!r} states family_facts: facts belong under families:")
                if families and entry.get("family") not in families:
                    raise ValueError(f"model {entry.get('name')!r} has family {entry.get('family')!r}, which is not "
                                     f"under families: ({', '.join(sorted(families))})")
                entry = {**entry, "family_facts": families.get(entry.get("family")) or {}}
            models.append(entry)
        return {**data, "models": models}

    @model_validator(mode="after")
    def _unique(self) -> Registry:
        seen: dict[str, str] = {}
        for entry in self.models:
            for key in (entry.name, entry.display_name, entry.hf_id, entry.api_model, *entry.aliases):
                if key is None:
                    continue
                owner = seen.setdefault(key.casefold(), entry.name)
                if owner != entry.name:
                    raise ValueError(f"'{key}' names both {owner} and {entry.name}")
        return self

    def reasoning_tags(self) -> tuple[tuple[str, str], ...]:
        """Every reasoning marker pair the registered families use (for models outside the registry)."""
        pairs = {entry.chat.thinking_tags for entry in self.models if entry.chat.thinking_tags}
        return tuple(sorted(pairs))

    def find(self, name: str) -> ModelEntry | None:
        """The entry whose name, paper name, HF id, API name or alias matches (case-insensitive)."""
        wanted = name.casefold()
        for entry in self.models:
            keys = (entry.name, entry.display_name, entry.hf_id, entry.api_model, *entry.aliases)
            if any(k is not None and k.casefold() == wanted for k in keys):
                return entry
        return None

    def get(self, name: str) -> ModelEntry:
        entry = self.find(name)
        if entry is None:
            raise RegistryError(f"model '{name}' is not in the registry{self.did_you_mean(name)} "
                                "(`mmbu eval models` lists every registered name)")
        return entry

    def names_of(self, entry: ModelEntry) -> tuple[str, ...]:
        """Every name `find` knows the entry by: name, paper name, HF id, API name, aliases (no repeats)."""
        names = (entry.name, entry.display_name, entry.hf_id, entry.api_model, *entry.aliases)
        return tuple(dict.fromkeys(n for n in names if n))

    def suggestions(self, name: str, n: int = 3) -> list[str]:
        """The registered names closest to a mistyped `name` (case-insensitive), best first."""
        known = {key.casefold(): key for entry in self.models for key in self.names_of(entry)}
        wanted = name.casefold()
        close = difflib.get_close_matches(wanted, known, n=n, cutoff=0.6)
        # a name given without its organisation ("Qwen2.5-VL-7B-Instruct") or with a typo in it
        close += [k for k in known if k not in close and (k.endswith("/" + wanted) or wanted.endswith("/" + k))]
        return [known[k] for k in close][:n]

    def did_you_mean(self, name: str) -> str:
        """"; did you mean 'X'? (also close: 'Y')" for a mistyped name, or "" when nothing is close."""
        close = self.suggestions(name)
        if not close:
            return ""
        others = f" (also close: {', '.join(repr(c) for c in close[1:])})" if close[1:] else ""
        return f"; did you mean {close[0]!r}?{others}"


def load_registry(path: str | Path | None = None) -> Registry:
    """Load and validate a registry YAML (default: the bundled one)."""
    path = Path(path) if path else REGISTRY_PATH
    try:
        data = read_yaml(path)
        return Registry.model_validate(data)
    except (OSError, yaml.YAMLError) as exc:
        raise RegistryError(f"{path}: cannot read the model registry ({exc})") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise RegistryError(f"{path}: invalid model registry at {where}: {first['msg']}") from exc


@lru_cache(maxsize=1)
def default_registry() -> Registry:
    return load_registry()


def ad_hoc_entry(name: str, scale: str, *, order: str = "xyxy") -> ModelEntry:
    """An entry for a model outside the registry; its box convention must be given explicitly."""
    given = "given on the command line (--box-format); the model is not in the registry"
    return ModelEntry(name=name, display_name=name, hf_id=name, family="unregistered",
                      box_format=BoxFormat(scale=scale, order=order), notes="not in the registry; --box-format given",
                      source=Sources(box_format=given, image="no limits: the image is sent as released",
                                     reasoning="unknown: every reasoning marker of the registry is stripped"))

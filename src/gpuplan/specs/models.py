"""Finding a model: a bundled preset, a local config.json, or a Hugging Face hub id.

Only the config.json is ever read, as plain JSON: no weights, no tokenizer, no code from the
repository (never `trust_remote_code`). Hub look-ups use huggingface_hub's cache first and say
clearly when the machine is offline.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlparse

from gpuplan.errors import InvalidSettingError, ModelConfigError, UnknownModelError, did_you_mean
from gpuplan.safeio import clip, clip_repr, load_json, read_capped
from gpuplan.specs import tomlcache
from gpuplan.specs.model import SUPPORTED_MODEL_TYPES, ModelSpec, model_from_config

_MAX_CONFIG_BYTES: Final = 4 * 1024 * 1024  # a config.json is a few KB; refuse anything huge


@dataclass(frozen=True)
class Preset:
    """A bundled model config with where it came from."""

    name: str
    file: str
    hf_id: str
    aliases: tuple[str, ...]
    source: str
    read: str
    published_params: int | None
    published_params_source: str
    note: str = ""
    verbatim: bool = True  # False where the config was rebuilt from documented hyperparameters


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", "-")


@lru_cache(maxsize=1)
def presets() -> dict[str, Preset]:
    """The bundled presets by name."""
    text = (resources.files("gpuplan") / "data" / "models" / "index.toml").read_text(encoding="utf-8")
    doc = tomlcache.loads(text)
    out: dict[str, Preset] = {}
    for name, body in doc.get("preset", {}).items():
        out[name] = Preset(
            name=name,
            file=body["file"],
            hf_id=body.get("hf_id", ""),
            aliases=tuple(body.get("aliases", [])),
            source=body.get("source", ""),
            read=str(body.get("read", "")),
            published_params=body.get("published_params"),
            published_params_source=body.get("published_params_source", ""),
            note=body.get("note", ""),
            verbatim=body.get("verbatim", True),
        )
    return out


@lru_cache(maxsize=1)
def _preset_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for p in presets().values():
        for label in (p.name, p.hf_id, *p.aliases):
            if label:
                index[_norm(label)] = p.name
    return index


def find_preset(name: str) -> Preset | None:
    key = _preset_index().get(_norm(name))
    return presets()[key] if key else None


def preset_config(preset: Preset) -> dict[str, Any]:
    text = (resources.files("gpuplan") / "data" / "models" / preset.file).read_text(encoding="utf-8")
    return parse_config_text(text, preset.name)


def parse_config_text(text: str, origin: str) -> dict[str, Any]:
    """A config.json's text as a dict, or one clear ModelConfigError."""
    try:  # bounded nesting, no NaN/Infinity tokens, no integer beyond 64 bits (gpuplan.safeio)
        data = load_json(text, origin)
    except InvalidSettingError as exc:
        raise ModelConfigError(str(exc)) from None
    if not isinstance(data, dict):
        raise ModelConfigError(f"{origin}: config.json must hold a JSON object, not {type(data).__name__}.")
    # multimodal wrappers keep the language model's config under text_config; a wrapper the reader
    # builds whole (Gemma 3: text decoder + SigLIP tower + projector) is read as it is
    wrapper_read_whole = data.get("model_type") in SUPPORTED_MODEL_TYPES
    if (
        "text_config" in data
        and isinstance(data["text_config"], dict)
        and "hidden_size" not in data
        and not wrapper_read_whole
    ):
        inner = dict(data["text_config"])
        inner.setdefault("model_type", data.get("model_type"))
        return inner
    return data


def read_config_file(path: Path) -> dict[str, Any]:
    """A config.json (or the one in a folder): a regular file of at most _MAX_CONFIG_BYTES, never
    a device or FIFO (`/dev/zero` has st_size 0 and would be read forever; a FIFO blocks)."""
    if path.is_dir():
        path = path / "config.json"
    if not _exists(path):
        raise UnknownModelError(f"No config.json at {clip_repr(str(path))}.")
    try:
        text = read_capped(path, "config.json", _MAX_CONFIG_BYTES)
    except InvalidSettingError as exc:
        raise ModelConfigError(str(exc)) from None
    return parse_config_text(text, clip(str(path)))


def _hub_config(repo_id: str) -> dict[str, Any]:
    """config.json of a hub repository: from the local cache, else downloaded when online."""
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import (
            EntryNotFoundError,
            GatedRepoError,
            LocalEntryNotFoundError,
            RepositoryNotFoundError,
        )
    except ImportError:
        raise UnknownModelError(
            f"{clip_repr(repo_id)} is not a bundled preset or a local path, and huggingface_hub (a gpuplan dependency) "
            "is missing to fetch it; reinstall gpuplan, or pass a path to its config.json."
        ) from None
    try:
        path = hf_hub_download(repo_id, "config.json", local_files_only=True)
    except (LocalEntryNotFoundError, EntryNotFoundError, OSError, ValueError):
        offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")
        if offline:
            raise UnknownModelError(
                f"{clip_repr(repo_id)} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set; "
                "download its config.json and pass the path, or use a bundled preset (`gpuplan models`)."
            ) from None
        host = _hub_host()
        if not _behind_proxy() and not _reachable(host):
            # fail fast: huggingface_hub would retry with back-off for about half a minute
            raise UnknownModelError(
                f"{clip_repr(repo_id)} is not in the local Hugging Face cache and {host} cannot be reached (offline?); "
                "download its config.json and pass the path, or use a bundled preset (`gpuplan models`)."
            ) from None
        try:
            path = hf_hub_download(repo_id, "config.json", etag_timeout=5)
        except (RepositoryNotFoundError, GatedRepoError) as exc:
            raise UnknownModelError(
                f"Hub repository {clip_repr(repo_id)} was not found or is gated ({type(exc).__name__}); "
                "pass a local config.json instead."
            ) from None
        except Exception as exc:  # network errors come in many types; all mean "could not fetch"
            raise UnknownModelError(
                f"Could not fetch config.json of {clip_repr(repo_id)} from the Hugging Face Hub (offline?): "
                f"{type(exc).__name__}. Pass a path to a local config.json or use a bundled preset."
            ) from None
    return read_config_file(Path(path))


def _hub_host() -> str:
    from huggingface_hub import constants

    return urlparse(constants.ENDPOINT).hostname or "huggingface.co"


def _behind_proxy() -> bool:
    """A proxy may reach the hub where a direct connection cannot: then skip the probe."""
    return any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"))


def _reachable(host: str, timeout_s: float = 3.0) -> bool:
    """True when a TCP connection to host:443 opens within the timeout."""
    try:
        import socket  # only for a hub look-up: a local estimate never opens one

        with socket.create_connection((host, 443), timeout=timeout_s):
            return True
    except OSError:
        return False


def _looks_like_hub_id(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not name.startswith((".", "/", "~")) and " " not in name


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # a name too long or otherwise impossible as a path is no file
        return False


def resolve_model_config(name_or_path: str, files: bool = True) -> tuple[str, dict[str, Any]]:
    """(display name, config dict) for a preset name, a local path (unless `files` is False, as
    for the web app, which reads no file a request names) or a hub id."""
    name_or_path = name_or_path.strip()
    if not name_or_path:
        raise UnknownModelError("No model given; pass a preset name, a config.json path or a hub id.")
    preset = find_preset(name_or_path)
    if preset is not None:
        return preset.name, preset_config(preset)
    path = Path(name_or_path).expanduser()
    if files and _exists(path):
        label = path.parent.name if path.is_file() and path.name == "config.json" else path.stem
        if path.is_dir():
            label = path.name
        return label or str(path), read_config_file(path)
    if files and (name_or_path.endswith(".json") or (os.sep in name_or_path and not _looks_like_hub_id(name_or_path))):
        raise UnknownModelError(f"No such file: {clip_repr(name_or_path)}.")
    if _looks_like_hub_id(name_or_path):
        return name_or_path, _hub_config(name_or_path)
    hint = did_you_mean(name_or_path, [p for p in presets()] + [a for p in presets().values() for a in p.aliases])
    what = (
        "a local config.json or a hub id (org/name)" if files else "a hub id (org/name); paste its config.json instead"
    )
    raise UnknownModelError(
        f"Unknown model {clip_repr(name_or_path)}: not a bundled preset, {what}."
        + (hint or " Run `gpuplan models` for the presets.")
    )


def load_model(name_or_path: str, files: bool = True) -> ModelSpec:
    """The ModelSpec of a preset name, a local config.json (file or folder; unless `files` is
    False) or a hub id."""
    name, config = resolve_model_config(name_or_path, files)
    return model_from_config(config, name)

"""What ``keel wrap`` knows of each agent client: its state, its settings, its key, its model host.

A client is recognised by the name of its executable or of its npm package (``claude`` /
``@anthropic-ai/claude-code``, ``codex`` / ``@openai/codex``, ``gemini`` /
``@google/gemini-cli``); ``--client`` names it when the executable says nothing (a wrapper
script). For each one:

- **state**: the directories and files it writes, bound read-write at the same path into the
  fresh HOME: Claude Code ``$CLAUDE_CONFIG_DIR`` or ``~/.claude`` plus ``~/.claude.json``; Codex
  ``$CODEX_HOME`` or ``~/.codex``; Gemini CLI ``~/.gemini``. A missing directory is created
  (mode 0700); a missing file is not bound (the client then writes it into the fresh HOME,
  where it is lost after the run);
- **settings**: the entries of that state that configure code the client runs later (hooks,
  MCP servers, model providers, commands, instructions), kept read-only inside (see
  ``keel.sandbox.wrap._state``): a wrapped agent must not leave a hook that runs outside the
  sandbox the next time the client is started without ``keel wrap``;
- **keys**: the variables that carry its credentials (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``,
  ``GEMINI_API_KEY``..., and the ``env_key`` of each Codex model provider). ``keel exec``'s
  filter removes every secret-like variable; these are put back, for this client only;
- **model hosts**: where its model API is, as ``host:port``, from its base-URL variables
  (``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``, ``GOOGLE_GEMINI_BASE_URL``) and Codex's
  ``model_providers.*.base_url``, else the vendor's public API hosts.

Standard library only.
"""

from __future__ import annotations

import os

from keel.core.errors import ExecRefused
from keel.core.frozen import Frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

CLIENTS = ("claude", "codex", "gemini")
PACKAGES = {
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "gemini": "@google/gemini-cli",
}
SETTINGS = {
    "claude": (
        "settings.json",
        "settings.local.json",
        "CLAUDE.md",
        "commands",
        "agents",
        "skills",
        "hooks",
        "output-styles",
    ),
    "codex": ("config.toml", "hooks.json", "AGENTS.md", "AGENTS.override.md", "rules", "prompts"),
    "gemini": ("settings.json", "GEMINI.md", "extensions", "commands", "policies"),
}
"""Entries of the client's state directory kept read-only inside ``keel wrap``."""
OWN_STATE = {"claude": (".claude", ".claude.json"), "codex": (".codex",), "gemini": (".gemini",)}
"""The HOME entries (otherwise secrets, never visible) that are the client's own state."""
KEYS = {
    "claude": ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"),
    "codex": ("OPENAI_API_KEY", "CODEX_API_KEY"),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}
BASE_URLS = {
    "claude": ("ANTHROPIC_BASE_URL",),
    "codex": ("OPENAI_BASE_URL",),
    "gemini": ("GOOGLE_GEMINI_BASE_URL",),
}
DEFAULT_HOSTS = {
    "claude": ("api.anthropic.com:443",),
    "codex": ("api.openai.com:443", "chatgpt.com:443", "auth.openai.com:443"),
    "gemini": (
        "generativelanguage.googleapis.com:443",
        "cloudcode-pa.googleapis.com:443",
        "oauth2.googleapis.com:443",
    ),
}
"""The vendor's API (and sign-in) hosts, allowed when no base URL names another."""


class ClientProfile(Frozen):
    """What one wrapped client needs besides ``keel exec``'s view."""

    __slots__ = ("guarded", "hosts", "keys", "name", "settings", "state")
    name: str
    """``claude``, ``codex``, ``gemini``, or ``other`` (nothing added)."""
    state: tuple[str, ...]
    """Absolute paths (directories and files) bound read-write at the same path."""
    settings: tuple[str, ...]
    """Absolute paths inside ``state`` kept read-only (whether they exist or not)."""
    keys: tuple[str, ...]
    """Variables passed to the client although they look like secrets."""
    hosts: tuple[str, ...]
    """``host:port`` of its model API, allowed through the proxy."""
    guarded: tuple[str, ...]
    """JSON state files the client rewrites but whose MCP and permission keys keel restores."""

    def __init__(
        self,
        name: str,
        state: tuple[str, ...],
        settings: tuple[str, ...],
        keys: tuple[str, ...],
        hosts: tuple[str, ...],
        guarded: tuple[str, ...] = (),
    ) -> None:
        self._init(
            guarded=guarded, hosts=hosts, keys=keys, name=name, settings=settings, state=state
        )


def detect_client(program: str, environ: Mapping[str, str]) -> str:
    """The client ``program`` (argv[0]) is: one of ``CLIENTS``, or ``other``."""
    found = _which(program, environ.get("PATH", ""))
    names = {os.path.basename(p) for p in (program, found, os.path.realpath(found))}
    resolved = os.path.realpath(found)
    for name in CLIENTS:
        if any(n == name or n.startswith(f"{name}.") for n in names):
            return name
        if f"/{PACKAGES[name]}/" in resolved:
            return name
    return "other"


def client_profile(name: str, environ: Mapping[str, str], home: str) -> ClientProfile:
    """The profile of client ``name`` for a user with ``environ`` and ``home``.

    Raises:
        ExecRefused: a base URL that is not an ``http(s)`` URL with a host (``wrap.base_url``).
    """
    if name not in CLIENTS:
        return ClientProfile(name, (), (), (), ())
    state_dir, files = _state(name, environ, home)
    settings = tuple(os.path.join(state_dir, rel) for rel in SETTINGS[name])
    keys, urls = list(KEYS[name]), [environ[v] for v in BASE_URLS[name] if environ.get(v)]
    custom_provider = False
    if name == "codex":
        provider_keys, provider_urls, custom_provider = _codex_providers(state_dir)
        keys += provider_keys
        urls += provider_urls
    hosts = [url_host_port(u) for u in urls]
    if not urls or (name == "codex" and not custom_provider and not environ.get("OPENAI_BASE_URL")):
        hosts += DEFAULT_HOSTS[name]
    guarded = (files or (os.path.join(state_dir, ".claude.json"),)) if name == "claude" else ()
    return ClientProfile(
        name,
        (state_dir, *files),
        settings,
        tuple(dict.fromkeys(keys)),
        tuple(dict.fromkeys(hosts)),
        guarded,
    )


def _state(name: str, environ: Mapping[str, str], home: str) -> tuple[str, tuple[str, ...]]:
    """The client's state directory and the state files beside it."""
    if name == "claude":
        custom = environ.get("CLAUDE_CONFIG_DIR")
        if custom:
            return _absolute(custom, home), ()
        return os.path.join(home, ".claude"), (os.path.join(home, ".claude.json"),)
    if name == "codex":
        return _absolute(environ.get("CODEX_HOME") or "~/.codex", home), ()
    return os.path.join(home, ".gemini"), ()


def _absolute(path: str, home: str) -> str:
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    return os.path.normpath(os.path.abspath(path))


def _codex_providers(state_dir: str) -> tuple[list[str], list[str], bool]:
    """``(env_key names, base URLs, whether a non-OpenAI provider is selected)`` of config.toml."""
    import tomllib

    try:
        with open(os.path.join(state_dir, "config.toml"), "rb") as fh:
            data = tomllib.loads(fh.read(1 << 20).decode("utf-8", "replace"))
    except (OSError, ValueError):
        return [], [], False
    providers = data.get("model_providers")
    keys: list[str] = []
    urls: list[str] = []
    for entry in providers.values() if isinstance(providers, dict) else ():
        if not isinstance(entry, dict):
            continue
        if isinstance(entry.get("env_key"), str):
            keys.append(entry["env_key"])
        if isinstance(entry.get("base_url"), str):
            urls.append(entry["base_url"])
    selected = data.get("model_provider")
    return keys, urls, isinstance(selected, str) and selected != "openai"


def url_host_port(url: str) -> str:
    """``host:port`` of an ``http(s)`` URL (the scheme's port when it names none).

    Raises:
        ExecRefused: not an ``http(s)`` URL with a host (``wrap.base_url``).
    """
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.strip())
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port, parts = None, None, None
    if parts is None or parts.scheme not in ("http", "https") or not host:
        raise ExecRefused(
            f"cannot tell the model host from the base URL {url!r}: give an http(s) URL, or "
            "allow the host with --allow-host",
            "wrap.base_url",
        )
    port = port or (443 if parts.scheme == "https" else 80)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _which(program: str, path: str) -> str:
    if "/" in program:
        return os.path.abspath(program)
    for folder in path.split(":"):
        candidate = os.path.join(folder or ".", program)
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return program


def install_roots(program: str, environ: Mapping[str, str]) -> tuple[str, ...]:
    """The directories the client's executable needs, to be shown read-only.

    For an npm install (a path through ``node_modules``) the outermost ``node_modules``, which
    holds the package, its dependencies and its platform binaries; otherwise the directory of
    the executable, for the path given and for the file it resolves to.
    """
    found = _which(program, environ.get("PATH", ""))
    roots: list[str] = []
    for path in (os.path.abspath(found), os.path.realpath(found)):
        parts = path.split("/")
        if "node_modules" in parts[:-1]:
            roots.append("/".join(parts[: parts.index("node_modules") + 1]))
        else:
            roots.append(os.path.dirname(path))
    return tuple(r for r in dict.fromkeys(roots) if r and r != "/" and os.path.isdir(r))

"""Environment variables that change what a command runs or where it connects.

``VAR=value cmd``, ``env VAR=value cmd``, ``export VAR=value`` and a bare ``VAR=value`` (an
exported variable stays exported) are judged by what the variable does:

- ``loader`` (``LD_PRELOAD``, ``BASH_ENV``...): code injected into every program. Denied
  uncontained, as before.
- ``code`` (``NODE_OPTIONS``, ``GIT_EXTERNAL_DIFF``, ``PAGER``, ``PYTHONPATH``, ``PATH``,
  ``GIT_CONFIG_*``, ``HOME``...): makes an allowed program run code the text does not show.
  Asked about uncontained. Contained, the code runs in the sandbox like any project code the
  preset lets run (developer); a preset that runs no project code (strict, readonly) still asks
  or denies.
- ``network`` (``PIP_INDEX_URL``, ``GOPROXY``, ``HTTPS_PROXY``...): changes where a program
  downloads from. Asked about uncontained (a URL value's host is also checked). Contained it is
  harmless: the only way out is keel's proxy, which enforces the same allowlist.
- ``cwd`` (``CDPATH``): ``cd`` no longer goes where the text says, so later paths are unknown.
  Asked about in both modes.

``git_config`` is true for the variables that can change what ``git push`` pushes (a refspec
with ``+`` is a force push): those are asked about even contained when git pushes.
"""

from __future__ import annotations

LOADER = frozenset(
    {"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "BASH_ENV", "ENV", "PROMPT_COMMAND", "GCONV_PATH"}
)
CODE = frozenset(
    {
        "PATH", "NODE_OPTIONS", "NODE_PATH", "PYTHONSTARTUP", "PYTHONPATH", "PYTHONHOME",
        "PYTHONUSERBASE", "PYTHONINSPECT", "PERL5OPT", "PERL5LIB", "PERLLIB", "PERL5DB",
        "RUBYOPT", "RUBYLIB", "LESSOPEN", "LESSCLOSE", "LESSKEYIN", "LESSKEY", "GIT_SSH_COMMAND",
        "GIT_SSH", "GIT_EXTERNAL_DIFF", "GIT_ASKPASS", "SSH_ASKPASS", "GIT_EXEC_PATH",
        "GIT_PAGER", "PAGER", "MANPAGER", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_PROXY_COMMAND",
        "GIT_TEMPLATE_DIR", "GIT_DIR", "GIT_WORK_TREE", "GIT_CONFIG", "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM", "GIT_CONFIG_COUNT", "GIT_CONFIG_PARAMETERS", "HOME",
        "XDG_CONFIG_HOME", "SHELLOPTS", "BASHOPTS", "PS4", "MAKEFLAGS", "MAKEFILES", "GOFLAGS",
        "RUSTC_WRAPPER", "RUSTC", "CARGO_BUILD_RUSTC_WRAPPER", "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "DOTNET_STARTUP_HOOKS", "PHPRC", "PHP_INI_SCAN_DIR",
        "EDITOR", "VISUAL", "BROWSER", "GIT_TRACE2_EVENT",
    }
)  # fmt: skip
CODE_PREFIXES = ("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_", "NPM_CONFIG_", "YARN_", "BUNDLE_")
NETWORK = frozenset(
    {
        "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_TRUSTED_HOST",
        "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_INDEX", "UV_DEFAULT_INDEX", "UV_FIND_LINKS",
        "GOPROXY", "GONOSUMDB", "GONOSUMCHECK", "GOSUMDB", "GOINSECURE", "GOPRIVATE",
        "GONOPROXY", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY",
        "CARGO_HTTP_PROXY", "CARGO_REGISTRIES_CRATES_IO_PROTOCOL", "GEM_HOST_API_KEY",
    }
)  # fmt: skip
CWD = frozenset({"CDPATH"})
GIT_CONFIG = frozenset(
    {
        "GIT_CONFIG", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_COUNT",
        "GIT_CONFIG_PARAMETERS", "GIT_DIR", "HOME", "XDG_CONFIG_HOME",
    }
)  # fmt: skip
_GIT_ONLY = frozenset({"EDITOR", "VISUAL"})
"""Variables that run code only through git (commit, rebase, tag without a message)."""


def kind(var: str, command: str | None) -> str | None:
    """What setting ``var`` does for ``command`` (``None``: every later command).

    One of ``loader``, ``code``, ``network``, ``cwd``, or ``None`` for a harmless variable.
    """
    upper = var.upper()
    if var in LOADER:
        return "loader"
    if var in CWD:
        return "cwd"
    if var in _GIT_ONLY:
        return "code" if command in (None, "git") else None
    if var in CODE or upper.startswith(CODE_PREFIXES):
        return "code"
    if upper in NETWORK or upper.startswith("CARGO_REGISTRIES_"):
        return "network"
    return None


def changes_git_config(var: str) -> bool:
    """True if ``var`` can add git configuration (a push refspec, a remote URL)."""
    return var in GIT_CONFIG or var.upper().startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))

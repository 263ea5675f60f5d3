"""The environment of a contained command: the caller's, minus secrets and injectors.

Removed: variables named like credentials (``TOKEN``, ``SECRET``, ``PASSW``, ``API_KEY``,
``CREDENTIAL``, ``ACCESS_KEY``, ``AWS_*``...), values that are URLs with a password, agent and
socket pointers (``SSH_AUTH_SOCK``, ``DOCKER_HOST``...), and variables that make a program load
or run other code (``LD_*``, ``GIT_CONFIG_*``, ``GIT_SSH_COMMAND``, ``NODE_OPTIONS``,
``BASH_ENV``, ``BASH_FUNC_*``, ``PYTHONSTARTUP``, ``PERL5OPT``, ``JAVA_TOOL_OPTIONS``...).
Set by keel: ``HOME``, ``TMPDIR``, the proxy variables (or none of them when the network is
off) and ``GIT_CONFIG_GLOBAL`` where git's user config is a filtered copy. ``PATH`` is kept.
``PYTHONPATH``, ``NODE_PATH`` and the like are kept: they name directories, which the sandbox
confines like any other path.

Standard library only: ``keel exec`` builds this on every run.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

SECRET_WORDS = (
    "TOKEN",
    "SECRET",
    "PASSW",
    "PASSPHRASE",
    "API_KEY",
    "APIKEY",
    "PRIVATE_KEY",
    "CREDENTIAL",
    "ACCESS_KEY",
    "SESSION_KEY",
    "AUTH_KEY",
    "COOKIE",
)
SECRET_PREFIXES = ("AWS_", "AZURE_", "GOOGLE_APPLICATION", "VAULT_", "KEEL_")
INJECT_PREFIXES = ("LD_", "DYLD_", "GIT_CONFIG", "BASH_FUNC_")
INJECT_NAMES = frozenset(
    {
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_SSH_VARIANT",
        "GIT_EXTERNAL_DIFF",
        "GIT_ASKPASS",
        "SSH_ASKPASS",
        "SUDO_ASKPASS",
        "GIT_EXEC_PATH",
        "GIT_PROXY_COMMAND",
        "GIT_TEMPLATE_DIR",
        "GIT_EDITOR",
        "GIT_SEQUENCE_EDITOR",
        "GIT_PAGER",
        "NODE_OPTIONS",
        "NODE_REPL_EXTERNAL_MODULE",
        "LESSOPEN",
        "LESSCLOSE",
        "BASH_ENV",
        "ENV",
        "PROMPT_COMMAND",
        "PS4",
        "SHELLOPTS",
        "BASHOPTS",
        "GLOBIGNORE",
        "CDPATH",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "PYTHONINSPECT",
        "PYTHONBREAKPOINT",
        "PERL5OPT",
        "PERL5DB",
        "PERLLIB",
        "RUBYOPT",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "DOTNET_STARTUP_HOOKS",
        "GCONV_PATH",
        "HOSTALIASES",
        "RES_OPTIONS",
        "LOCALDOMAIN",
        "npm_config_script_shell",
        "npm_config_node_options",
        "npm_config_onload_script",
        "npm_config_userconfig",
        "npm_config_globalconfig",
        "SSH_AUTH_SOCK",
        "SSH_AGENT_PID",
        "GPG_AGENT_INFO",
        "DBUS_SESSION_BUS_ADDRESS",
        "DOCKER_HOST",
        "DOCKER_CONFIG",
        "KUBECONFIG",
        "KRB5CCNAME",
        "XAUTHORITY",
        "OLDPWD",
    }
)
PROXY_NAMES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
    "npm_config_proxy",
    "npm_config_https_proxy",
)
CLEARED_PROXY_NAMES = frozenset(
    {
        *PROXY_NAMES,
        "ALL_PROXY",
        "all_proxy",
        "FTP_PROXY",
        "ftp_proxy",
        "NO_PROXY",
        "no_proxy",
        "npm_config_noproxy",
        "PIP_PROXY",
        "YARN_HTTP_PROXY",
        "YARN_HTTPS_PROXY",
    }
)

_DROPPED = frozenset(n.upper() for n in (*INJECT_NAMES, *CLEARED_PROXY_NAMES))


def contained_env(
    environ: Mapping[str, str],
    *,
    home: str,
    tmpdir: str,
    proxy_url: str | None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment for the contained command (see the module docstring)."""
    env = {k: v for k, v in environ.items() if kept(k, v)}
    env["HOME"] = home
    env["TMPDIR"] = tmpdir
    if proxy_url is not None:
        for name in PROXY_NAMES:
            env[name] = proxy_url
        env["NO_PROXY"] = env["no_proxy"] = ""
    env.update(extra or {})
    return env


def kept(name: str, value: str) -> bool:
    """Whether the caller's variable ``name=value`` reaches the contained command."""
    if not name or "=" in name or "\x00" in name or "\x00" in value:
        return False
    upper = name.upper()
    if upper in _DROPPED or upper.startswith(INJECT_PREFIXES):
        return False
    if upper.startswith(SECRET_PREFIXES) or any(w in upper for w in SECRET_WORDS):
        return False
    return not _has_password(value)


def _has_password(value: str) -> bool:
    """``scheme://user:password@host``: a URL that carries a password."""
    scheme = value.find("://")
    if scheme < 0:
        return False
    at = value.find("@", scheme)
    slash = value.find("/", scheme + 3)
    return at > 0 and (slash < 0 or at < slash) and ":" in value[scheme + 3 : at]

"""Finding the cluster like kubectl does (shared by both programs; a kubernetes backend module)."""

from __future__ import annotations

import yaml
from kubernetes import client, config

from common.cli import UsageError


class NoClusterConfig(UsageError):
    """Neither in-cluster configuration nor a usable kubeconfig."""


def load_api_client(kubeconfig: str | None) -> client.ApiClient:
    """In-cluster config inside a pod, else --kubeconfig / $KUBECONFIG / ~/.kube/config."""
    try:
        if kubeconfig:
            config.load_kube_config(config_file=kubeconfig)
        else:
            try:
                config.load_incluster_config()
            except config.ConfigException:
                config.load_kube_config()
    except (
        config.ConfigException,
        OSError,
        ValueError,
        TypeError,
        KeyError,
        AttributeError,
        yaml.YAMLError,
    ) as err:
        where = f"kubeconfig {kubeconfig}" if kubeconfig else "in-cluster or ~/.kube/config"
        raise NoClusterConfig(
            f"no usable cluster configuration ({where}): {_why(err)}; "
            "run inside a pod, or pass --kubeconfig FILE or set KUBECONFIG"
        ) from None
    return client.ApiClient()


def _why(err: Exception) -> str:
    """What was wrong, without the file name the caller already says (OSError and YAML errors
    name it again) and on one line (YAML errors span three)."""
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    if isinstance(err, yaml.MarkedYAMLError):
        mark = err.problem_mark
        line = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return f"not valid YAML: {err.problem or err.context}{line}"
    if isinstance(err, yaml.YAMLError):
        return "not valid YAML"
    if isinstance(err, TypeError | KeyError | AttributeError):
        return f"not a kubeconfig ({type(err).__name__}: {err})"
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__

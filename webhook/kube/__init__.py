"""Kubernetes access every flow reaches down to: list-watch, API calls, NodeSelector semantics."""

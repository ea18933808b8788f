"""Shared API model, label and annotation keys, and pure derivations used by agent and webhook."""

"""The leader's group placer: its inputs, decisions, Kubernetes I/O and words to pods."""

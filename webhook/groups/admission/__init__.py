"""A grouped pod at CREATE: its group checked, the pod gated and labelled."""

"""Exports: the labels' fabric as Kueue, KAI, Volcano and Slurm read it, offline and in-cluster."""

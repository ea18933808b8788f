"""Exports: the fabric as other schedulers read it (Kueue, KAI, Volcano, Slurm), offline and kept
in the cluster; built from the same Positions as the network labels."""

"""IMEX channels for groups on GB200/GB300 NVL72 (DESIGN.md "IMEX channels")."""

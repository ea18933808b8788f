"""What extensions build on: the named points the placer runs, and the one lifecycle of the
objects a group owns (owned.py, lifecycle.py, ownedkube.py)."""

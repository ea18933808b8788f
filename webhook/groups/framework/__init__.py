"""What extensions build on: the placer's extension points (points.py)."""

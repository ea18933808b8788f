"""The placer's extensions: each implements the points of framework/points.py it needs."""

"""Labeler: node labels from statuses and the fabric, kept by server-side apply."""

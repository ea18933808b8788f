"""Admission: a review in, the decision and its JSONPatch out (review -> requirements -> patch)."""

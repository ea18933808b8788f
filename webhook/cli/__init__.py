"""Offline commands: mutate, explain and topology over files, no cluster needed."""

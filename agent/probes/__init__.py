"""Probes: each reads one part of the host through a HostReader and returns plain values."""

"""Group placement: multi-node jobs land in one leaf, leaf pair, leaf quad or spine, all or nothing.

Pure decision code (capacity, choose, admit, enforce, selector) with the Kubernetes I/O kept in
kube.py; the placer controller (placer.py) drives the pure steps from watch events.
"""

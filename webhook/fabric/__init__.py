"""Network position: learn where every node sits in the cluster fabric (issue 8).

Each source format parses into the same model (``model.Fabric``); ``levels.Positions`` turns it into
the four network labels of DESIGN.md. Everything here is pure; the cluster side is ``controller``.
"""

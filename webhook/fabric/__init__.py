"""Network position: topology sources -> one Fabric model -> leaf, pair, quad, spine per node."""

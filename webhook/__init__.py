"""gpufabric admission webhook and labeler."""

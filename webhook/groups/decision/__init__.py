"""Which domain a group goes to, onto which nodes, in which ranks: pure."""

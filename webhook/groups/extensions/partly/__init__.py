"""The partly-bound watch: every ungated group, native gang or not, until all its members bind."""

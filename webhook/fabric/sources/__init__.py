"""Topology sources in, each read into one Fabric; `formats` picks the reader: ibnetdiscover
(`ib/`), Slurm (`slurm`), a static map (`static`), node labels (`nodelabels`). ConfigMap parts:
`parts`, `split`, `inbox`, `textchunks`; `join` gives each node its HCA GUIDs, `build` holds the
steps the tree sources share."""

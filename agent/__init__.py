"""gpufabric node agent: probe the node's GPU fabric and publish it as a GpuNodeStatus."""

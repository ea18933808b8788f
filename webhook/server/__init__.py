"""Transport: the aiohttp TLS server, its connection limits and the metrics it exposes."""

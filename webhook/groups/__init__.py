"""Group placement: group -> domain (NVLink domain, leaf, pair, quad, spine) -> ranks -> ungate."""

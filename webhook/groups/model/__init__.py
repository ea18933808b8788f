"""What every room reads: the names, and a Pod and a Node as placement reads them."""

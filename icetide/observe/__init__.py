"""observe stage."""

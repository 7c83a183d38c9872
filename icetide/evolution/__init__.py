"""evolution stage."""

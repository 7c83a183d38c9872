"""maintenance stage."""

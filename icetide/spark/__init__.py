"""spark stage."""

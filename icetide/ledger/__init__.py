"""ledger stage."""

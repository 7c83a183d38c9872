"""Views over mirrored tables: their registry, their derived schemas and stable field ids.

``registry`` keeps each view's SQL and versions in a folder beside the schema files;
``derive`` reads a view's schema from its SQL's logical plan (sqlglot) against the tables'
schemas; ``ids`` keeps a view column's field id stable across the view's versions.
"""

"""Typed artifacts: each table and view version published as an installable Python package.

A mirror's schema (or a view's, derived from its SQL) becomes a package version: the
generated sources (``codegen``), built into a wheel (``wheel``) and published to a package
index (``index``) only when something changed (``publish``), numbered by what changed
(``versioning``: additive → minor, anything else → major). ``refresh`` and ``watch`` keep
the packages current while ``icetide run`` moves tables to new schema versions;
``workspace`` says where a pipeline's artifacts live. ``views/`` holds icetide's own view
registry and derives view schemas with sqlglot.

The public face is :func:`~icetide.artifacts.workspace.publish_all` and the ``icetide
artifacts`` / ``icetide views`` commands; the rest is internal.
"""

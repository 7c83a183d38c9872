"""Where a pipeline keeps what it needs to resume: a folder, or a prefix on an object store.

:mod:`icetide.state.store` opens the pipeline's state location (``state:`` in the config,
``state_dir`` when it is not set) as small named files, each replaced whole: on a local
folder by temp file and rename (:mod:`icetide.state.durable`), on S3 by one PUT, which
is atomic per object. :mod:`icetide.state.s3` builds the S3 client from the catalog's
``S3FileIO`` properties, the same ones preflight checks.
"""

# The project's version, one place for the whole tree and for shared/ built alone.
set(OUTBOX_VERSION 0.4.0)

// A shared library needs one source of its own; everything else comes from the static libraries.

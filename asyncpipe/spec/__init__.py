"""What a device, a launch and a tensor map are, and the rules they obey: pure data and functions, no GPU
and no simulator. Both backends (``asyncpipe.backend.gpu``, ``asyncpipe.sim``) and the host API
(``asyncpipe.host``) build on them; they import nothing of asyncpipe but ``constants`` and ``errors``."""

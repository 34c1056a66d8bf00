"""The embedded default model: a llama.cpp server (xllamacpp) in a child process on 127.0.0.1.

    server      start, find, reuse and stop the server; warm its prompt cache
    child       the child process that runs it (`python -m nbchat.embedded.child serve`)
    modelfiles  the table of models it can load, finding their files, assembling the Qwen GGUFs;
                the machine's cores and memory, and the model `auto` picks from them
    runtime     its run directory and the process record shared across kernels; the server
                stops itself after `local_idle_timeout` without a request
    slots       what it read of a prompt, saved to disk and restored after a restart

Must not: import anything of nbchat above the ground floor.
"""

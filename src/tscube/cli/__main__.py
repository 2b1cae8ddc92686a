"""``python -m tscube.cli``: the ``tscube`` command."""

from .app import app

if __name__ == "__main__":
    app()

"""A fresh server's first run opened at /trust goes on into app.py: see pages/lib/first_run.py."""

from pages.lib.first_run import run_app

run_app()
